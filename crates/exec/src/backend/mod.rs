//! The three backends behind one enum, chosen once from the `--db` URL.

mod mysql;
mod mysql_errors;
mod postgres;
mod sqlite;
mod sqlite_budget;
mod sqlite_cells;
mod sqlite_errors;
mod sqlite_functions;
mod sqlite_inline;
mod sqlite_jobs;
#[cfg(test)]
mod sqlite_tests;
mod target;

pub use mysql::{MySqlBackend, MySqlTx};
pub use postgres::{Listener, PgBackend, PgTx};
pub use sqlite::{SqliteBackend, SqliteTx};
pub use sqlite_inline::InlineReads;

use crate::cancel::within_deadline;
use crate::sink::RowSink;
use crate::ExecError;
use apijet_core::{Capabilities, Engine};
use apijet_sql::{Dialect, Statement};

/// Prepared statements each database connection keeps (the least recently used are closed
/// first); with `statement_cache_bytes` it bounds what a connection keeps prepared.
pub const STATEMENTS_KEPT: usize = 256;

/// A connection pool to one database.
pub enum Backend {
    /// Embedded SQLite.
    Sqlite(SqliteBackend),
    /// PostgreSQL.
    Postgres(PgBackend),
    /// MySQL or MariaDB.
    MySql(MySqlBackend),
}

/// What a connection pool is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbRole {
    /// The database every write goes to; `replicated` when reads also go to replicas, which
    /// then must see a write before it is acknowledged.
    Primary {
        /// Read replicas are configured.
        replicated: bool,
    },
    /// A read replica (GET and HEAD only).
    Replica,
}

/// A parsed `--db` URL. PostgreSQL and MySQL URLs may name several hosts
/// (`postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write`,
/// `mysql://u@h1:3306,h2:3307/db`), tried in order when a connection is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// `sqlite://PATH`
    Sqlite(String),
    /// `postgres://…` / `postgresql://…`
    Postgres(String),
    /// `mysql://…` / `mariadb://…`
    MySql(String),
}

impl DbUrl {
    /// Parses a database URL, or says what forms are accepted.
    pub fn parse(url: &str) -> Result<DbUrl, ExecError> {
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err(ExecError::Connect("sqlite:// needs a file path".into()));
            }
            return Ok(DbUrl::Sqlite(path.to_string()));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(DbUrl::Postgres(url.to_string()));
        }
        if let Some(rest) = url.strip_prefix("mariadb://") {
            let url = format!("mysql://{rest}");
            split_hosts(&url)?;
            return Ok(DbUrl::MySql(url));
        }
        if url.starts_with("mysql://") {
            split_hosts(url)?;
            return Ok(DbUrl::MySql(url.to_string()));
        }
        Err(ExecError::Connect(format!(
            "unsupported database URL '{url}': use sqlite://PATH, postgres://USER[:PASS]@HOST[:PORT]/DB or mysql://USER[:PASS]@HOST[:PORT]/DB"
        )))
    }

    /// The engine the URL names.
    pub fn engine(&self) -> Engine {
        self.capabilities().engine
    }

    /// What the engine the URL names can do.
    pub fn capabilities(&self) -> Capabilities {
        match self {
            DbUrl::Sqlite(_) => Capabilities::SQLITE,
            DbUrl::Postgres(_) => Capabilities::POSTGRES,
            DbUrl::MySql(_) => Capabilities::MYSQL,
        }
    }
}

/// One URL per host of a `scheme://userinfo@h1:p1,h2:p2/path?query` URL, each with the same
/// user, database and parameters; a single-host URL is returned as it is.
pub fn split_hosts(url: &str) -> Result<Vec<String>, ExecError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| ExecError::Connect(format!("'{url}' is not a URL")))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
    if hosts.iter().any(|h| h.is_empty()) {
        return Err(ExecError::Connect(format!(
            "'{url}': an empty host in the host list"
        )));
    }
    Ok(hosts
        .iter()
        .map(|h| format!("{scheme}://{userinfo}{h}{tail}"))
        .collect())
}

impl Backend {
    /// Connects to the database; SQLite files are created when `create_sqlite` is set.
    pub async fn connect(
        url: &DbUrl,
        pool_size: usize,
        statement_timeout_ms: u64,
        create_sqlite: bool,
        role: DbRole,
    ) -> Result<Backend, ExecError> {
        Ok(match url {
            DbUrl::Sqlite(path) => Backend::Sqlite(
                SqliteBackend::open(path, create_sqlite)?
                    .with_timeout(std::time::Duration::from_millis(statement_timeout_ms))
                    .with_threads(pool_size),
            ),
            DbUrl::Postgres(u) => Backend::Postgres(
                PgBackend::connect(u, pool_size, statement_timeout_ms, role).await?,
            ),
            DbUrl::MySql(u) => {
                Backend::MySql(MySqlBackend::connect(u, pool_size, statement_timeout_ms).await?)
            }
        })
    }

    /// The longest value a statement may make, where the engine can refuse longer ones itself
    /// (SQLite); the others are bounded by the planner and their own settings.
    pub fn set_max_value_bytes(&mut self, bytes: usize) {
        if let Backend::Sqlite(b) = self {
            b.set_max_value_bytes(bytes);
        }
    }

    /// Keeps prepared, per connection, at most [`STATEMENTS_KEPT`] statements of at most
    /// `bytes` / [`STATEMENTS_KEPT`] bytes of text each (`statement_cache_bytes`); longer ones
    /// are closed after their run.
    pub fn set_statement_cache_bytes(&mut self, bytes: usize) {
        match self {
            Backend::Sqlite(b) => b.set_statement_cache_bytes(bytes),
            Backend::Postgres(b) => b.set_statement_cache_bytes(bytes),
            Backend::MySql(b) => b.set_statement_cache_bytes(bytes),
        }
    }

    /// Forgets what it learnt about statements' output columns (the schema is read again).
    pub fn forget_outputs(&self) {
        if let Backend::Sqlite(b) = self {
            b.forget_outputs();
        }
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.capabilities().engine
    }

    /// What the engine can do: the one place its abilities are stated, so that the planner
    /// and the server ask them instead of comparing engine names.
    pub fn capabilities(&self) -> Capabilities {
        match self {
            Backend::Sqlite(_) => Capabilities::SQLITE,
            Backend::Postgres(_) => Capabilities::POSTGRES,
            Backend::MySql(_) => Capabilities::MYSQL,
        }
    }

    /// The dialect that renders statements for this backend.
    pub fn dialect(&self) -> Box<dyn Dialect> {
        let mariadb = matches!(self, Backend::MySql(m) if m.mariadb);
        apijet_sql::dialect_for(self.engine(), mariadb)
    }

    /// Connections lent out and requests waiting for one (SQLite opens another connection
    /// instead of waiting; mysql_async does not say, so MySQL answers zeros).
    pub fn pool_status(&self) -> (i64, i64) {
        match self {
            Backend::Postgres(b) => b.pool_status(),
            Backend::Sqlite(b) => (b.in_use(), 0),
            Backend::MySql(b) => b.pool_status(),
        }
    }

    /// Runs a statement, feeding its rows to `sink`; returns the row count. The request's
    /// [`crate::cancel::Watch`] may stop it early.
    pub async fn fetch<S: RowSink>(
        &self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        let started = std::time::Instant::now();
        let result = match self {
            // SQLite watches its statements itself, between VM steps.
            Backend::Sqlite(b) => b.fetch(stmt, sink).await,
            _ => within_deadline(&crate::cancel::current(), self.fetch_plain(stmt, sink)).await,
        };
        let debug = tracing::enabled!(target: "apijet::sql", tracing::Level::DEBUG);
        log_statement(debug.then_some(started), stmt, &result);
        if let Some(limit) = crate::stats::slow_statement() {
            let elapsed = started.elapsed();
            if elapsed >= limit {
                self.log_slow(stmt, elapsed).await;
            }
        }
        result
    }

    async fn fetch_plain<S: RowSink>(
        &self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        match self {
            Backend::Sqlite(b) => b.fetch(stmt, sink).await,
            Backend::Postgres(b) => b.fetch(stmt, sink).await,
            Backend::MySql(b) => b.fetch(stmt, sink).await,
        }
    }

    /// Logs a slow statement with the engine's plan for it, so that a missing index shows.
    async fn log_slow(&self, stmt: &Statement, elapsed: std::time::Duration) {
        let prefix = match self.engine() {
            Engine::Sqlite => "EXPLAIN QUERY PLAN ",
            _ => "EXPLAIN ",
        };
        let probe = Statement {
            sql: format!("{prefix}{}", stmt.sql),
            binds: stmt.binds.clone(),
            bounded: false,
        };
        let mut sink = crate::sink::CollectSink::new(&[]);
        let plan = match self.fetch_plain(&probe, &mut sink).await {
            Ok(_) => sink
                .rows
                .iter()
                .map(|row| {
                    row.values()
                        .map(|v| match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join(" | ")
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Err(e) => format!("(EXPLAIN failed: {e})"),
        };
        tracing::warn!(
            target: "apijet::slow",
            ms = elapsed.as_millis() as u64,
            sql = %stmt.sql,
            "slow statement; plan:\n{plan}"
        );
    }

    /// Starts a transaction; every write request runs in exactly one.
    pub async fn begin(&self) -> Result<Tx<'_>, ExecError> {
        Ok(match self {
            Backend::Sqlite(b) => Tx::Sqlite(b.begin().await?),
            Backend::Postgres(b) => Tx::Postgres(Box::new(b.begin().await?)),
            Backend::MySql(b) => Tx::MySql(Box::new(b.begin().await?)),
        })
    }

    /// Runs statements that return nothing, in order.
    pub async fn execute_script(&self, statements: &[String]) -> Result<(), ExecError> {
        match self {
            Backend::Sqlite(b) => b.execute_script(statements).await,
            Backend::Postgres(b) => b.execute_script(statements).await,
            Backend::MySql(b) => b.execute_script(statements).await,
        }
    }
}

/// `APIJET_LOG=apijet::sql=debug` (or `debug`): each statement with its time and row count.
fn log_statement(
    timed: Option<std::time::Instant>,
    stmt: &Statement,
    result: &Result<u64, ExecError>,
) {
    if let Some(started) = timed {
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(rows) => {
                tracing::debug!(target: "apijet::sql", ms, rows, sql = %stmt.sql, "statement")
            }
            Err(e) => {
                tracing::debug!(target: "apijet::sql", ms, error = %e, sql = %stmt.sql, "statement failed")
            }
        }
    }
}

/// An open transaction on one backend.
pub enum Tx<'a> {
    /// SQLite.
    Sqlite(SqliteTx<'a>),
    /// PostgreSQL.
    Postgres(Box<PgTx>),
    /// MySQL or MariaDB.
    MySql(Box<MySqlTx>),
}

impl Tx<'_> {
    /// Runs a statement; returns the rows it changed.
    pub async fn execute(&mut self, stmt: &Statement) -> Result<u64, ExecError> {
        let timed = tracing::enabled!(target: "apijet::sql", tracing::Level::DEBUG)
            .then(std::time::Instant::now);
        let watch = crate::cancel::current();
        let result = match self {
            Tx::Sqlite(t) => t.execute(stmt).await,
            Tx::Postgres(t) => within_deadline(&watch, t.execute(stmt)).await,
            Tx::MySql(t) => within_deadline(&watch, t.execute(stmt)).await,
        };
        log_statement(timed, stmt, &result);
        result
    }

    /// Runs a query inside the transaction.
    pub async fn fetch<S: RowSink>(
        &mut self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        let watch = crate::cancel::current();
        match self {
            Tx::Sqlite(t) => t.fetch(stmt, sink).await,
            Tx::Postgres(t) => within_deadline(&watch, t.fetch(stmt, sink)).await,
            Tx::MySql(t) => within_deadline(&watch, t.fetch(stmt, sink)).await,
        }
    }

    /// Commits.
    pub async fn commit(self) -> Result<(), ExecError> {
        match self {
            Tx::Sqlite(t) => t.commit().await,
            Tx::Postgres(t) => (*t).commit().await,
            Tx::MySql(t) => (*t).commit().await,
        }
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<(), ExecError> {
        match self {
            Tx::Sqlite(t) => t.rollback().await,
            Tx::Postgres(t) => (*t).rollback().await,
            Tx::MySql(t) => (*t).rollback().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_engine() {
        assert_eq!(
            DbUrl::parse("sqlite://a.db").expect("ok").engine(),
            Engine::Sqlite
        );
        assert_eq!(
            DbUrl::parse("postgres://u@h/db").expect("ok").engine(),
            Engine::Postgres
        );
        assert_eq!(
            DbUrl::parse("mariadb://u@h/db").expect("ok"),
            DbUrl::MySql("mysql://u@h/db".into())
        );
        assert!(DbUrl::parse("oracle://x").is_err());
    }

    #[test]
    fn host_lists_split_into_one_url_per_host() {
        assert_eq!(
            split_hosts("mysql://u:p@a:1,b:2/db?x=1").expect("ok"),
            ["mysql://u:p@a:1/db?x=1", "mysql://u:p@b:2/db?x=1"]
        );
        assert_eq!(split_hosts("mysql://a/db").expect("ok"), ["mysql://a/db"]);
        assert_eq!(
            DbUrl::parse("mariadb://u@a:1,b:2/db").expect("ok"),
            DbUrl::MySql("mysql://u@a:1,b:2/db".into())
        );
        assert!(DbUrl::parse("mysql://u@a:1,/db").is_err());
    }
}
