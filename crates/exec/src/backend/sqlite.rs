//! Embedded SQLite through rusqlite.
//!
//! SQLite calls block, so a statement runs on the current worker under `block_in_place`, on a
//! connection from a small pool; flushing a sink blocks on the async consumer from there, which
//! pauses the cursor while the client is slow. `regexp` and `regexp_ci` are registered on every
//! connection, since SQLite has no regex function of its own.

use crate::cell::{recycle, Cell};
use crate::sink::RowSink;
use crate::{DbErrorKind, ExecError};
use apijet_core::Value;
use apijet_sql::Statement;
use chrono::{NaiveDate, NaiveDateTime};
use regex::Regex;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// A pool of SQLite connections to one file.
pub struct SqliteBackend {
    path: String,
    idle: Mutex<Vec<Connection>>,
}

impl SqliteBackend {
    /// Opens `path` (creating it when `create` is set).
    pub fn open(path: &str, create: bool) -> Result<SqliteBackend, ExecError> {
        let backend = SqliteBackend {
            path: path.to_string(),
            idle: Mutex::new(Vec::new()),
        };
        let conn = backend.new_connection(create)?;
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
        Ok(conn)
    }

    fn take(&self) -> Result<Connection, ExecError> {
        let conn = self.idle.lock().ok().and_then(|mut v| v.pop());
        match conn {
            Some(c) => Ok(c),
            None => self.new_connection(false),
        }
    }

    fn put(&self, conn: Connection) {
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
        let result = tokio::task::block_in_place(|| run(&conn, stmt, sink, &handle));
        self.put(conn);
        result
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
        tokio::task::block_in_place(|| {
            let mut prepared = conn.prepare_cached(&stmt.sql).map_err(db_error)?;
            bind(&mut prepared, &stmt.binds)?;
            prepared.raw_execute().map(|n| n as u64).map_err(db_error)
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
        tokio::task::block_in_place(|| run(conn, stmt, sink, &handle))
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

fn run<S: RowSink>(
    conn: &Connection,
    stmt: &Statement,
    sink: &mut S,
    handle: &tokio::runtime::Handle,
) -> Result<u64, ExecError> {
    let mut prepared = conn.prepare_cached(&stmt.sql).map_err(db_error)?;
    let names: Vec<String> = prepared
        .column_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let decl: Vec<String> = prepared
        .columns()
        .iter()
        .map(|c| c.decl_type().unwrap_or_default().to_ascii_uppercase())
        .collect();
    bind(&mut prepared, &stmt.binds)?;
    sink.columns(&names);
    let mut rows = prepared.raw_query();
    let mut spare: Vec<Cell<'static>> = Vec::with_capacity(names.len());
    let mut n = 0u64;
    while let Some(row) = rows.next().map_err(db_error)? {
        let mut cells: Vec<Cell<'_>> = recycle(spare);
        for (i, d) in decl.iter().enumerate() {
            let v = row.get_ref(i).map_err(db_error)?;
            cells.push(cell(v, d));
        }
        sink.row(&cells).map_err(|_| ExecError::ClientGone)?;
        spare = recycle(cells);
        n += 1;
        if sink.wants_flush() {
            handle
                .block_on(sink.flush())
                .map_err(|_| ExecError::ClientGone)?;
        }
    }
    Ok(n)
}

/// Declared types decide how text is answered: `JSON` as JSON, `DATETIME`/`TIMESTAMP` as
/// timestamps, `DECIMAL`/`NUMERIC` as decimal strings.
fn cell<'a>(v: ValueRef<'a>, decl: &str) -> Cell<'a> {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(i) if decl.contains("DECIMAL") || decl.contains("NUMERIC") => {
            Cell::Decimal(Cow::Owned(i.to_string()))
        }
        ValueRef::Integer(i) if decl.starts_with("BOOL") => Cell::Bool(i != 0),
        ValueRef::Integer(i) => Cell::Int(i),
        ValueRef::Real(f) if decl.contains("DECIMAL") || decl.contains("NUMERIC") => {
            Cell::Decimal(Cow::Owned(f.to_string()))
        }
        ValueRef::Real(f) => Cell::Float(f),
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            if decl.contains("JSON") {
                Cell::Json(s)
            } else if decl.contains("DATETIME") || decl.contains("TIMESTAMP") {
                NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S%.f")
                    .map(Cell::DateTime)
                    .unwrap_or(Cell::Text(s))
            } else if decl == "DATE" {
                NaiveDate::parse_from_str(&s, "%Y-%m-%d")
                    .map(Cell::Date)
                    .unwrap_or(Cell::Text(s))
            } else {
                Cell::Text(s)
            }
        }
        ValueRef::Blob(b) => Cell::Bytes(Cow::Borrowed(b)),
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
