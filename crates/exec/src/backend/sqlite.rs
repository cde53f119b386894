//! Embedded SQLite through rusqlite.
//!
//! Every statement runs as a job on a blocking thread ([`super::sqlite_jobs`]), at most
//! `pool_size` at once, stopped by a watchdog at its deadline or when its client is gone; the
//! async workers only wait for its rows. A read whose plan proves its cost bounded runs on the
//! async worker instead, within a step budget ([`super::sqlite_inline`]). Connections are
//! pooled (a new one is opened when none is idle). Writers of this process queue for SQLite's one write lock without a thread.
//! `regexp` and `regexp_ci` are registered on every connection, since SQLite has no regex
//! function of its own, and so are the MySQL functions SQLite lacks, each bounded per call.

use super::sqlite_cells::Decl;
use super::sqlite_errors::{db_error, step_error};
use super::sqlite_inline::{hand_over, Inline, InlineReads, INLINE_STEPS};
use super::sqlite_jobs::{Conn, Connections, Fed, Feed, Jobs, On, Output, TxConn};
use super::STATEMENTS_KEPT;
use crate::cancel::Watch;
use crate::cell::Cell;
use crate::sink::{ColumnNames, RowSink, SinkError};
use crate::{DbErrorKind, ExecError};
use apijet_core::Value;
use apijet_sql::Statement;
use regex::Regex;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a statement waits for a lock another connection holds (SQLITE_BUSY).
const BUSY_WAIT: Duration = Duration::from_secs(5);

/// A pool of SQLite connections to one file, and the threads its statements run on.
pub struct SqliteBackend {
    pool: Arc<Pool>,
    jobs: Jobs,
    /// `statement_timeout_ms`: SQLite has no timeout of its own, so the watchdog applies it.
    timeout: Duration,
    /// The process's write lock: one transaction at a time, as SQLite allows.
    writer: Arc<tokio::sync::Mutex<()>>,
    /// The VM instructions a bounded read may run inline before it moves to a job.
    inline_steps: u32,
    /// How bounded reads ran.
    inline: InlineReads,
}

/// The connections, and what every connection shares.
struct Pool {
    path: String,
    idle: Mutex<Vec<Conn>>,
    /// The output columns of statements run before, by SQL text.
    outputs: Outputs,
    /// Connections lent out, for `/metrics`.
    in_use: AtomicI64,
    /// The longest string or blob a statement or a function may make (SQLITE_LIMIT_LENGTH);
    /// 0: SQLite's own.
    max_value_bytes: Arc<AtomicUsize>,
    /// The longest statement text kept prepared (`statement_cache_bytes` / [`STATEMENTS_KEPT`]).
    kept_text: AtomicUsize,
}

impl SqliteBackend {
    /// Opens `path` (creating it when `create` is set).
    pub fn open(path: &str, create: bool) -> Result<SqliteBackend, ExecError> {
        let pool = Pool {
            path: path.to_string(),
            idle: Mutex::new(Vec::new()),
            outputs: Outputs::default(),
            in_use: AtomicI64::new(1),
            max_value_bytes: Arc::new(AtomicUsize::new(0)),
            kept_text: AtomicUsize::new(usize::MAX),
        };
        let conn = pool.connect(create).map_err(|e| match e {
            ExecError::Connect(why) => super::target::sqlite_failure(path, &why),
            other => super::target::sqlite_failure(path, &other.to_string()),
        })?;
        pool.put(conn);
        Ok(SqliteBackend {
            pool: Arc::new(pool),
            jobs: Jobs::new(1),
            timeout: Duration::ZERO,
            writer: Arc::new(tokio::sync::Mutex::new(())),
            inline_steps: INLINE_STEPS,
            inline: InlineReads::default(),
        })
    }

    /// Moves a bounded read to a job once it ran `steps` VM instructions inline (tests make it
    /// small; the default is 10,000).
    pub fn with_inline_steps(mut self, steps: u32) -> SqliteBackend {
        self.inline_steps = steps;
        self
    }

    /// How bounded reads ran: inline, or moved to a job.
    pub fn inline_reads(&self) -> &InlineReads {
        &self.inline
    }

    /// Stops statements that run longer than `timeout` (zero: never).
    pub fn with_timeout(mut self, timeout: Duration) -> SqliteBackend {
        self.timeout = timeout;
        self
    }

    /// Runs at most `threads` statements at once.
    pub fn with_threads(mut self, threads: usize) -> SqliteBackend {
        self.jobs = Jobs::new(threads);
        self
    }

    /// Makes the engine refuse (SQLITE_TOOBIG) any string or blob longer than `bytes`, however
    /// a statement builds it: a concatenation of many rows, a function of a function. The
    /// registered functions refuse to make one (`lpad(s, 20000000, s)`), naming the limit.
    pub fn set_max_value_bytes(&mut self, bytes: usize) {
        self.pool.max_value_bytes.store(bytes, Ordering::Relaxed);
        if let Ok(idle) = self.pool.idle.lock() {
            for conn in idle.iter() {
                self.pool.limit(&conn.db);
            }
        }
    }

    /// Keeps prepared only statements of at most `bytes` / [`STATEMENTS_KEPT`] bytes of
    /// text, so what a connection keeps stays within `bytes` (`statement_cache_bytes`).
    pub fn set_statement_cache_bytes(&mut self, bytes: usize) {
        let longest = bytes / STATEMENTS_KEPT;
        self.pool.kept_text.store(longest, Ordering::Relaxed);
    }

    /// What stops this request's statements: its own watch and `statement_timeout_ms`.
    fn watch(&self) -> Watch {
        crate::cancel::current().with_timeout(self.timeout, "statement_timeout_ms")
    }

    /// Connections lent out (a new one is opened when none is idle, so nobody waits).
    pub fn in_use(&self) -> i64 {
        self.pool.in_use.load(Ordering::Relaxed)
    }

    fn pool(&self) -> Arc<dyn Connections> {
        Arc::clone(&self.pool) as Arc<dyn Connections>
    }

    /// Runs a statement, feeding every row to `sink`: inline when its plan proves it bounded
    /// and a connection is idle, as a job otherwise.
    pub async fn fetch<S: RowSink>(
        &self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        if stmt.bounded {
            let inline = self.read_inline(stmt);
            self.inline.count(&inline);
            match inline {
                Inline::Read(output, rows) => return hand_over(&output, rows, sink).await,
                Inline::Failed(e) => return Err(e),
                Inline::Moved => {}
            }
        }
        let work = query_work(stmt, &self.pool);
        let watch = self.watch();
        let (result, _) = self
            .jobs
            .run(self.pool(), On::Pool, Some(&watch), sink, work)
            .await;
        result
    }

    /// Runs a bounded read on this thread, on an idle connection, within its step budget and
    /// one row; its row is copied, to be handed on once the statement ended.
    fn read_inline(&self, stmt: &Statement) -> Inline {
        let Some(conn) = self.pool.take_idle() else {
            return Inline::Moved;
        };
        // A lock SQLite would wait for (a WAL being recovered, a connection in exclusive
        // mode) is waited for by a job, never here.
        let _ = conn.db.busy_timeout(Duration::ZERO);
        let mut rows = Box::new(Fed::new());
        let result = with_prepared(&conn.db, stmt, &self.pool, |prepared, output| {
            conn.budget.arm(self.inline_steps);
            let width = output.names.len();
            let mut stepping = prepared.raw_query();
            let mut read = 0;
            while let Some(row) = stepping.next().map_err(step_error)? {
                read += 1;
                if read > 1 {
                    // A key lookup finds one row at most: the proof was wrong.
                    return Ok(None);
                }
                for i in 0..width {
                    rows.push(row.get_ref(i).map_err(db_error)?);
                }
            }
            Ok(Some(Arc::clone(output)))
        });
        let overran = conn.budget.disarm();
        let _ = conn.db.busy_timeout(BUSY_WAIT);
        self.pool.put(conn);
        match result {
            Ok(Some(output)) if !overran => Inline::Read(output, rows),
            Err(ExecError::Db {
                kind: DbErrorKind::Timeout,
                ..
            }) => Inline::Moved,
            Err(e) if !overran => Inline::Failed(e),
            _ => Inline::Moved,
        }
    }

    /// Forgets what statements answer: the schema may have changed under the same SQL.
    pub fn forget_outputs(&self) {
        if let Ok(mut m) = self.pool.outputs.0.lock() {
            m.clear();
        }
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`), once this process's other writers are
    /// done: they queue here, without a thread.
    pub async fn begin(&self) -> Result<SqliteTx<'_>, ExecError> {
        let writer = Arc::clone(&self.writer).lock_owned().await;
        let (result, tx) = self
            .jobs
            .run(
                self.pool(),
                On::Begin(writer),
                None,
                &mut NoRows,
                |db, _| {
                    db.execute_batch("BEGIN IMMEDIATE").map_err(db_error)?;
                    Ok(0)
                },
            )
            .await;
        match (result, tx) {
            (Ok(_), Some(tx)) => Ok(SqliteTx {
                backend: self,
                conn: Some(tx),
            }),
            (result, tx) => {
                if let Some(tx) = tx {
                    self.pool.put(tx.conn);
                }
                Err(result.err().unwrap_or_else(|| {
                    ExecError::Connect("the transaction could not start".into())
                }))
            }
        }
    }

    /// Runs statements that return no rows (schema set-up, demo data), in one transaction.
    pub async fn execute_script(&self, statements: &[String]) -> Result<(), ExecError> {
        let statements = statements.to_vec();
        let (result, _) = self
            .jobs
            .run(self.pool(), On::Pool, None, &mut NoRows, move |db, _| {
                db.execute_batch("BEGIN").map_err(db_error)?;
                for s in &statements {
                    if let Err(e) = db.execute_batch(s) {
                        let _ = db.execute_batch("ROLLBACK");
                        return Err(db_error(e));
                    }
                }
                db.execute_batch("COMMIT").map_err(db_error)?;
                Ok(0)
            })
            .await;
        result.map(|_| ())
    }
}

impl Pool {
    fn connect(&self, create: bool) -> Result<Conn, ExecError> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(&self.path, flags)
            .map_err(|e| ExecError::Connect(format!("{}: {e}", self.path)))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        conn.busy_timeout(BUSY_WAIT).map_err(db_error)?;
        conn.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        register_regex(&conn, "regexp", false)?;
        register_regex(&conn, "regexp_ci", true)?;
        super::sqlite_functions::register(&conn, Arc::clone(&self.max_value_bytes))
            .map_err(db_error)?;
        self.limit(&conn);
        Ok(Conn::new(conn))
    }

    fn limit(&self, conn: &Connection) {
        let bytes = self.max_value_bytes.load(Ordering::Relaxed);
        if bytes > 0 {
            let _ = conn.set_limit(
                rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
                i32::try_from(bytes).unwrap_or(i32::MAX),
            );
        }
    }

    /// An idle connection, if one is: never opens one.
    fn take_idle(&self) -> Option<Conn> {
        let conn = self.idle.lock().ok()?.pop()?;
        self.in_use.fetch_add(1, Ordering::Relaxed);
        Some(conn)
    }

    /// Whether a statement of `sql` is kept prepared.
    fn keeps(&self, sql: &str) -> bool {
        sql.len() <= self.kept_text.load(Ordering::Relaxed)
    }
}

impl Connections for Pool {
    fn take(&self) -> Result<Conn, ExecError> {
        let conn = self.idle.lock().ok().and_then(|mut v| v.pop());
        let conn = match conn {
            Some(c) => c,
            None => self.connect(false)?,
        };
        self.in_use.fetch_add(1, Ordering::Relaxed);
        Ok(conn)
    }

    fn put(&self, conn: Conn) {
        self.in_use.fetch_sub(1, Ordering::Relaxed);
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
    }
}

/// Prepares `stmt` on `db` (kept prepared when it is short enough), binds its values and
/// runs `run` on it with its output columns.
fn with_prepared<T>(
    db: &Connection,
    stmt: &Statement,
    pool: &Pool,
    run: impl FnOnce(&mut rusqlite::Statement<'_>, &Arc<Output>) -> Result<T, ExecError>,
) -> Result<T, ExecError> {
    let keep = pool.keeps(&stmt.sql);
    let mut kept: rusqlite::CachedStatement<'_>;
    let mut once: rusqlite::Statement<'_>;
    let prepared: &mut rusqlite::Statement<'_> = if keep {
        kept = db.prepare_cached(&stmt.sql).map_err(db_error)?;
        &mut kept
    } else {
        once = db.prepare(&stmt.sql).map_err(db_error)?;
        &mut once
    };
    let output = pool.outputs.of(&stmt.sql, prepared, keep);
    bind(prepared, &stmt.binds)?;
    run(prepared, &output)
}

/// The work of a query on its thread: prepare, bind, hand every row over.
fn query_work(
    stmt: &Statement,
    pool: &Arc<Pool>,
) -> impl FnOnce(&Connection, &mut Feed) -> Result<u64, ExecError> + Send + 'static {
    let (stmt, pool) = (stmt.clone(), Arc::clone(pool));
    move |db, feed| {
        with_prepared(db, &stmt, &pool, |prepared, output| {
            feed.columns(output);
            let width = output.names.len();
            let mut rows = prepared.raw_query();
            let mut n = 0u64;
            while let Some(row) = rows.next().map_err(step_error)? {
                feed.row(row, width)?;
                n += 1;
            }
            Ok(n)
        })
    }
}

/// The sink of a job that reads no rows.
struct NoRows;

impl RowSink for NoRows {
    fn columns<'n>(&mut self, _names: impl ColumnNames<'n>) {}

    fn row(&mut self, _cells: &[Cell<'_>]) -> Result<(), SinkError> {
        Ok(())
    }
}

/// An open transaction on a pooled connection; dropped unfinished, it rolls back.
pub struct SqliteTx<'a> {
    backend: &'a SqliteBackend,
    /// None while a statement of it runs, and once it was lost or finished.
    conn: Option<Box<TxConn>>,
}

impl SqliteTx<'_> {
    /// Runs `work` on the transaction's connection, as the request's watch says.
    async fn on_conn<S, W>(
        &mut self,
        sink: &mut S,
        watched: bool,
        work: W,
    ) -> Result<u64, ExecError>
    where
        S: RowSink,
        W: FnOnce(&Connection, &mut Feed) -> Result<u64, ExecError> + Send + 'static,
    {
        let conn = self
            .conn
            .take()
            .ok_or(ExecError::Connect("the transaction is closed".into()))?;
        let watch = self.backend.watch();
        let pool = self.backend.pool();
        let (result, back) = self
            .backend
            .jobs
            .run(pool, On::Tx(conn), watched.then_some(&watch), sink, work)
            .await;
        self.conn = back;
        result
    }

    /// Runs a statement; returns the rows it changed.
    pub async fn execute(&mut self, stmt: &Statement) -> Result<u64, ExecError> {
        let stmt = stmt.clone();
        let pool = Arc::clone(&self.backend.pool);
        self.on_conn(&mut NoRows, true, move |db, _| {
            let mut prepared;
            let mut once;
            let prepared: &mut rusqlite::Statement<'_> = if pool.keeps(&stmt.sql) {
                prepared = db.prepare_cached(&stmt.sql).map_err(db_error)?;
                &mut prepared
            } else {
                once = db.prepare(&stmt.sql).map_err(db_error)?;
                &mut once
            };
            bind(prepared, &stmt.binds)?;
            prepared.raw_execute().map(|n| n as u64).map_err(step_error)
        })
        .await
    }

    /// Runs a query inside the transaction, feeding its rows to `sink`.
    pub async fn fetch<S: RowSink>(
        &mut self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        let work = query_work(stmt, &self.backend.pool);
        self.on_conn(sink, true, work).await
    }

    async fn finish(&mut self, sql: &'static str) -> Result<(), ExecError> {
        if self.conn.is_none() {
            return Err(ExecError::Connect("the transaction is closed".into()));
        }
        let result = self
            .on_conn(&mut NoRows, false, move |db, _| {
                db.execute_batch(sql).map_err(db_error).map(|_| 0)
            })
            .await;
        if let Some(tx) = self.conn.take() {
            if tx.conn.db.is_autocommit() {
                self.backend.pool.put(tx.conn);
            } else {
                // A COMMIT that failed leaves the transaction open: dropping rolls it back.
                self.conn = Some(tx);
            }
        }
        result.map(|_| ())
    }

    /// Commits.
    pub async fn commit(mut self) -> Result<(), ExecError> {
        self.finish("COMMIT").await
    }

    /// Rolls back.
    pub async fn rollback(mut self) -> Result<(), ExecError> {
        self.finish("ROLLBACK").await
    }
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        let Some(tx) = self.conn.take() else {
            return;
        };
        let pool = Arc::clone(&self.backend.pool);
        // Never hand a connection back with a transaction open; the rollback runs on a thread
        // of its own, holding the write lock until it is done.
        let rollback = move || {
            tx.roll_back_into(&*pool);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(rollback);
            }
            Err(_) => rollback(),
        }
    }
}

fn bind(prepared: &mut rusqlite::Statement<'_>, binds: &[Value]) -> Result<(), ExecError> {
    for (i, v) in binds.iter().enumerate() {
        let idx = i + 1;
        match v {
            Value::Null => prepared.raw_bind_parameter(idx, rusqlite::types::Null),
            Value::Bool(b) => prepared.raw_bind_parameter(idx, *b),
            Value::Int(n) => prepared.raw_bind_parameter(idx, *n),
            Value::Float(f) => prepared.raw_bind_parameter(idx, *f),
            Value::Text(s) => prepared.raw_bind_parameter(idx, s.as_str()),
        }
        .map_err(db_error)?;
    }
    Ok(())
}

/// Output columns of statements by SQL text, so that a statement run again does not read and
/// classify its columns again. Bounded in entries and, as the statement cache is, in the
/// length of the texts it keeps; emptied when the schema is read again.
///
/// Hashed with foldhash, seeded per process, as the statement caches are: SipHash over the
/// text was a visible part of every statement run, and [`OUTPUTS`] bounds what colliding texts
/// can cost.
#[derive(Default)]
struct Outputs(Mutex<HashMap<String, Arc<Output>, foldhash::fast::RandomState>>);

/// Statements whose output columns are kept.
const OUTPUTS: usize = 1024;

impl Outputs {
    fn of(&self, sql: &str, prepared: &rusqlite::Statement<'_>, keep: bool) -> Arc<Output> {
        if let Some(o) = self.0.lock().ok().and_then(|m| m.get(sql).cloned()) {
            if o.names.len() == prepared.column_count() {
                return o;
            }
        }
        let columns = prepared.columns();
        let output = Arc::new(Output {
            names: columns.iter().map(|c| c.name().to_string()).collect(),
            kinds: columns
                .iter()
                .map(|c| Decl::of(c.decl_type().unwrap_or_default()))
                .collect(),
        });
        if keep {
            if let Ok(mut m) = self.0.lock() {
                if m.len() >= OUTPUTS {
                    m.clear();
                }
                m.insert(sql.to_string(), Arc::clone(&output));
            }
        }
        output
    }
}

fn register_regex(conn: &Connection, name: &str, case_insensitive: bool) -> Result<(), ExecError> {
    conn.create_scalar_function(
        name,
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        move |ctx| {
            let re: Arc<Regex> = ctx.get_or_create_aux(0, |v| -> Result<Regex, BoxError> {
                let pattern = v.as_str()?;
                let pattern = if case_insensitive {
                    format!("(?i){pattern}")
                } else {
                    pattern.to_string()
                };
                Ok(Regex::new(&pattern)?)
            })?;
            Ok(match ctx.get_raw(1) {
                ValueRef::Text(t) => re.is_match(&String::from_utf8_lossy(t)),
                ValueRef::Integer(i) => re.is_match(&i.to_string()),
                ValueRef::Real(f) => re.is_match(&f.to_string()),
                _ => false,
            })
        },
    )
    .map_err(db_error)
}

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
