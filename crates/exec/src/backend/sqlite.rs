//! Embedded SQLite through rusqlite.
//!
//! SQLite calls block. A read into a sink that holds everything until the end (a point lookup,
//! a nested object) first runs right on the worker under a budget of VM steps
//! ([`DIRECT_BUDGET`]): most finish within it, without `block_in_place` handing the worker's
//! queue to another thread. One that runs out is stopped and run again under `block_in_place`,
//! as every other statement is, on a connection from a small pool; flushing a sink blocks on
//! the async consumer from there, which pauses the cursor while the client is slow. `regexp` and `regexp_ci` are registered on every
//! connection, since SQLite has no regex function of its own.

use super::sqlite_cells::{cell, Decl};
use crate::cancel::{Stop, Watch};
use crate::cell::{recycle, Cell};
use crate::sink::RowSink;
use crate::{DbErrorKind, ExecError};
use apijet_core::Value;
use apijet_sql::Statement;
use regex::Regex;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// SQLite VM steps a read may take on the async worker before it is moved off it (about a
/// millisecond or less: an indexed lookup takes a few hundred).
const DIRECT_BUDGET: i32 = 50_000;

/// VM steps between two looks at a statement's deadline and client: a few hundred
/// microseconds of work, so a stopped statement ends within a millisecond or so.
const WATCH_STEPS: i32 = 20_000;

/// Reads that ran out of [`DIRECT_BUDGET`] and ran again (for the test of that path).
#[cfg(test)]
static RERUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A pool of SQLite connections to one file.
pub struct SqliteBackend {
    path: String,
    idle: Mutex<Vec<Connection>>,
    /// The output columns of statements run before, by SQL text.
    outputs: Outputs,
    /// Connections lent out, for `/metrics`.
    in_use: std::sync::atomic::AtomicI64,
    /// `statement_timeout_ms`: SQLite has no timeout of its own, so the progress handler
    /// applies it.
    timeout: Duration,
    /// The longest string or blob a statement may make (SQLITE_LIMIT_LENGTH); 0: SQLite's own.
    max_value_bytes: i32,
}

impl SqliteBackend {
    /// Opens `path` (creating it when `create` is set).
    pub fn open(path: &str, create: bool) -> Result<SqliteBackend, ExecError> {
        let backend = SqliteBackend {
            path: path.to_string(),
            idle: Mutex::new(Vec::new()),
            outputs: Outputs::default(),
            in_use: std::sync::atomic::AtomicI64::new(1),
            timeout: Duration::ZERO,
            max_value_bytes: 0,
        };
        let conn = backend.new_connection(create).map_err(|e| match e {
            ExecError::Connect(why) => super::target::sqlite_failure(path, &why),
            other => super::target::sqlite_failure(path, &other.to_string()),
        })?;
        backend.put(conn);
        Ok(backend)
    }

    fn new_connection(&self, create: bool) -> Result<Connection, ExecError> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(&self.path, flags)
            .map_err(|e| ExecError::Connect(format!("{}: {e}", self.path)))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db_error)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(db_error)?;
        conn.set_prepared_statement_cache_capacity(256);
        register_regex(&conn, "regexp", false)?;
        register_regex(&conn, "regexp_ci", true)?;
        super::sqlite_functions::register(&conn).map_err(db_error)?;
        self.limit(&conn);
        Ok(conn)
    }

    /// Stops statements that run longer than `timeout` (zero: never).
    pub fn with_timeout(mut self, timeout: Duration) -> SqliteBackend {
        self.timeout = timeout;
        self
    }

    /// Makes the engine refuse (SQLITE_TOOBIG) any string or blob longer than `bytes`, however
    /// a statement builds it: a concatenation of many rows, a function of a function.
    pub fn set_max_value_bytes(&mut self, bytes: usize) {
        self.max_value_bytes = i32::try_from(bytes).unwrap_or(i32::MAX);
        if let Ok(idle) = self.idle.lock() {
            for conn in idle.iter() {
                self.limit(conn);
            }
        }
    }

    fn limit(&self, conn: &Connection) {
        if self.max_value_bytes > 0 {
            let _ = conn.set_limit(
                rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
                self.max_value_bytes,
            );
        }
    }

    /// What stops this request's statements: its own watch and `statement_timeout_ms`.
    fn watch(&self) -> Watch {
        crate::cancel::current().with_timeout(self.timeout, "statement_timeout_ms")
    }

    /// Connections lent out (a new one is opened when none is idle, so nobody waits).
    pub fn in_use(&self) -> i64 {
        self.in_use.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn take(&self) -> Result<Connection, ExecError> {
        let conn = self.idle.lock().ok().and_then(|mut v| v.pop());
        let conn = match conn {
            Some(c) => c,
            None => self.new_connection(false)?,
        };
        self.in_use
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(conn)
    }

    fn put(&self, conn: Connection) {
        self.in_use
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
    }

    /// Runs a statement, feeding every row to `sink`.
    pub async fn fetch<S: RowSink>(
        &self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        let conn = self.take()?;
        let handle = tokio::runtime::Handle::current();
        if sink.restartable() {
            let over = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&over);
            conn.progress_handler(
                DIRECT_BUDGET,
                Some(move || {
                    flag.store(true, Ordering::Relaxed);
                    true
                }),
            );
            let direct = run(&conn, stmt, sink, &handle, &self.outputs);
            conn.progress_handler(0, None::<fn() -> bool>);
            if !over.load(Ordering::Relaxed) {
                self.put(conn);
                return direct;
            }
            sink.restart();
            #[cfg(test)]
            RERUNS.fetch_add(1, Ordering::Relaxed);
        }
        let watch = self.watch();
        let result = tokio::task::block_in_place(|| {
            stoppable(&conn, &watch, || {
                run(&conn, stmt, sink, &handle, &self.outputs)
            })
        });
        self.put(conn);
        result
    }

    /// Forgets what statements answer: the schema may have changed under the same SQL.
    pub fn forget_outputs(&self) {
        if let Ok(mut m) = self.outputs.0.lock() {
            m.clear();
        }
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`: writers queue here, not at commit).
    pub async fn begin(&self) -> Result<SqliteTx<'_>, ExecError> {
        let conn = self.take()?;
        let started = tokio::task::block_in_place(|| conn.execute_batch("BEGIN IMMEDIATE"));
        if let Err(e) = started {
            self.put(conn);
            return Err(db_error(e));
        }
        Ok(SqliteTx {
            backend: self,
            conn: Some(conn),
        })
    }

    /// Runs statements that return no rows (schema set-up, demo data).
    pub async fn execute_script(&self, statements: &[String]) -> Result<(), ExecError> {
        let conn = self.take()?;
        let result = tokio::task::block_in_place(|| -> Result<(), ExecError> {
            conn.execute_batch("BEGIN").map_err(db_error)?;
            for s in statements {
                conn.execute_batch(s).map_err(db_error)?;
            }
            conn.execute_batch("COMMIT").map_err(db_error)
        });
        self.put(conn);
        result
    }
}

/// An open transaction on a pooled connection; dropped unfinished, it rolls back.
pub struct SqliteTx<'a> {
    backend: &'a SqliteBackend,
    conn: Option<Connection>,
}

impl SqliteTx<'_> {
    fn conn(&self) -> Result<&Connection, ExecError> {
        self.conn
            .as_ref()
            .ok_or(ExecError::Connect("the transaction is closed".into()))
    }

    /// Runs a statement; returns the rows it changed.
    pub async fn execute(&mut self, stmt: &Statement) -> Result<u64, ExecError> {
        let conn = self.conn()?;
        let watch = self.backend.watch();
        tokio::task::block_in_place(|| {
            stoppable(conn, &watch, || {
                let mut prepared = conn.prepare_cached(&stmt.sql).map_err(db_error)?;
                bind(&mut prepared, &stmt.binds)?;
                prepared.raw_execute().map(|n| n as u64).map_err(step_error)
            })
        })
    }

    /// Runs a query inside the transaction, feeding its rows to `sink`.
    pub async fn fetch<S: RowSink>(
        &mut self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        let conn = self.conn()?;
        let handle = tokio::runtime::Handle::current();
        let watch = self.backend.watch();
        tokio::task::block_in_place(|| {
            stoppable(conn, &watch, || {
                run(conn, stmt, sink, &handle, &self.backend.outputs)
            })
        })
    }

    fn finish(&mut self, sql: &str) -> Result<(), ExecError> {
        let Some(conn) = self.conn.take() else {
            return Ok(());
        };
        let r = tokio::task::block_in_place(|| conn.execute_batch(sql)).map_err(db_error);
        self.backend.put(conn);
        r
    }

    /// Commits.
    pub async fn commit(mut self) -> Result<(), ExecError> {
        self.finish("COMMIT")
    }

    /// Rolls back.
    pub async fn rollback(mut self) -> Result<(), ExecError> {
        self.finish("ROLLBACK")
    }
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // Never hand a connection back with a transaction open.
            if conn.execute_batch("ROLLBACK").is_ok() {
                self.backend.put(conn);
            }
        }
    }
}

/// Runs `statement` on `conn`, stopped (interrupted) when `watch` says so: its deadline
/// passed or its client left.
fn stoppable<T>(
    conn: &Connection,
    watch: &Watch,
    statement: impl FnOnce() -> Result<T, ExecError>,
) -> Result<T, ExecError> {
    if !watch.is_active() {
        return statement();
    }
    let started = Instant::now();
    let stopped: Arc<Mutex<Option<Stop>>> = Arc::default();
    let (seen, watch) = (Arc::clone(&stopped), watch.clone());
    conn.progress_handler(
        WATCH_STEPS,
        Some(move || match watch.stop(started) {
            Some(stop) => {
                if let Ok(mut slot) = seen.lock() {
                    *slot = Some(stop);
                }
                true
            }
            None => false,
        }),
    );
    let result = statement();
    conn.progress_handler(0, None::<fn() -> bool>);
    let stop = stopped.lock().ok().and_then(|mut s| s.take());
    match (result, stop) {
        (Err(_), Some(stop)) => Err(stop.error()),
        (result, _) => result,
    }
}

fn bind(prepared: &mut rusqlite::CachedStatement<'_>, binds: &[Value]) -> Result<(), ExecError> {
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
/// classify its columns again. Bounded; emptied when the schema is read again.
#[derive(Default)]
struct Outputs(Mutex<HashMap<String, Arc<Output>>>);

/// The output columns of one statement.
struct Output {
    names: Vec<String>,
    kinds: Vec<Decl>,
}

/// Statements whose output columns are kept.
const OUTPUTS: usize = 1024;

impl Outputs {
    fn of(&self, sql: &str, prepared: &rusqlite::CachedStatement<'_>) -> Arc<Output> {
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
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= OUTPUTS {
                m.clear();
            }
            m.insert(sql.to_string(), Arc::clone(&output));
        }
        output
    }
}

fn run<S: RowSink>(
    conn: &Connection,
    stmt: &Statement,
    sink: &mut S,
    handle: &tokio::runtime::Handle,
    outputs: &Outputs,
) -> Result<u64, ExecError> {
    let mut prepared = conn.prepare_cached(&stmt.sql).map_err(db_error)?;
    let output = outputs.of(&stmt.sql, &prepared);
    let (names, kinds) = (&output.names, &output.kinds);
    bind(&mut prepared, &stmt.binds)?;
    sink.columns(names.iter().map(String::as_str));
    let mut rows = prepared.raw_query();
    let mut spare: Vec<Cell<'static>> = Vec::with_capacity(names.len());
    let mut n = 0u64;
    while let Some(row) = rows.next().map_err(step_error)? {
        let mut cells: Vec<Cell<'_>> = recycle(spare);
        for (i, d) in kinds.iter().enumerate() {
            let v = row.get_ref(i).map_err(db_error)?;
            cells.push(cell(v, *d));
        }
        sink.row(&cells).map_err(ExecError::from)?;
        spare = recycle(cells);
        n += 1;
        if sink.wants_flush() {
            handle.block_on(sink.flush()).map_err(ExecError::from)?;
        }
    }
    Ok(n)
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

/// An error of a prepared statement while it runs. SQLite has no classes of errors, but where
/// they happen says enough: a statement that prepared names only what exists, so a generic
/// error while it steps comes from evaluating a value (`json_length` of text that is not JSON,
/// a function's own refusal), a client's mistake as PostgreSQL's class 22 is.
fn step_error(e: rusqlite::Error) -> ExecError {
    let generic = matches!(
        &e,
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::Unknown
    );
    match db_error(e) {
        ExecError::Db {
            kind: DbErrorKind::Other,
            message,
        } if generic => ExecError::Db {
            kind: DbErrorKind::BadValue,
            message,
        },
        other => other,
    }
}

fn db_error(e: rusqlite::Error) -> ExecError {
    let kind = match &e {
        rusqlite::Error::SqliteFailure(f, _) => match f.code {
            rusqlite::ErrorCode::ConstraintViolation => {
                if f.extended_code == 2067 || f.extended_code == 1555 {
                    DbErrorKind::Unique
                } else {
                    DbErrorKind::Constraint
                }
            }
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => {
                DbErrorKind::Timeout
            }
            rusqlite::ErrorCode::TooBig => DbErrorKind::TooLarge,
            _ => DbErrorKind::Other,
        },
        rusqlite::Error::UserFunctionError(_) => DbErrorKind::BadValue,
        _ => DbErrorKind::Other,
    };
    let message = e.to_string();
    let kind = if message.contains("no such column") || message.contains("syntax error") {
        DbErrorKind::Syntax
    } else if message.contains("no such function") {
        DbErrorKind::Unsupported
    } else if message.contains("regex parse error") {
        DbErrorKind::BadPattern
    } else {
        kind
    };
    ExecError::Db { kind, message }
}

#[cfg(test)]
mod tests {
    use super::{SqliteBackend, DIRECT_BUDGET, RERUNS};
    use crate::sink::CollectSink;
    use apijet_sql::Statement;
    use std::sync::atomic::Ordering;

    /// A read too long for the worker's budget is stopped and run again off the worker: its
    /// answer is every row once, and the connection goes back without the budget.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_past_the_direct_budget_runs_again_whole() {
        let dir = std::env::temp_dir().join(format!("apijet-sqlite-budget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("t.db");
        let backend = SqliteBackend::open(path.to_str().expect("utf-8 path"), true).expect("open");
        let rows = 20_000;
        backend
            .execute_script(&[
                "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)".into(),
                format!(
                    "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows}) \
                     INSERT INTO t SELECT i, 'row ' || i FROM s"
                ),
            ])
            .await
            .expect("fill");
        // Sorting 20,000 rows takes far more VM steps than the budget.
        assert!(rows * 10 > DIRECT_BUDGET as usize);
        let all = Statement {
            sql: "SELECT id, v FROM t ORDER BY v DESC".into(),
            binds: vec![],
        };
        for _ in 0..2 {
            let mut sink = CollectSink::new(&[]);
            let n = backend.fetch(&all, &mut sink).await.expect("fetch");
            assert_eq!(n, rows as u64);
            assert_eq!(sink.rows.len(), rows);
            let mut ids: Vec<i64> = sink.rows.iter().filter_map(|r| r["id"].as_i64()).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), rows, "every row exactly once");
        }
        assert_eq!(
            RERUNS.load(Ordering::Relaxed),
            2,
            "both long reads ran again"
        );
        // A short read on the same (pooled) connection answers directly.
        let one = Statement {
            sql: "SELECT v FROM t WHERE id = ?1".into(),
            binds: vec![apijet_core::Value::Int(7)],
        };
        let mut sink = CollectSink::new(&[]);
        backend.fetch(&one, &mut sink).await.expect("fetch one");
        assert_eq!(
            RERUNS.load(Ordering::Relaxed),
            2,
            "a point read finishes within the budget"
        );
        assert_eq!(sink.rows.len(), 1);
        assert_eq!(sink.rows[0]["v"], "row 7");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
