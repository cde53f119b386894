//! MySQL and MariaDB through mysql_async.
//!
//! Statements run through the binary protocol (`exec_iter`), and rows are read one packet at a
//! time, so a long list never sits in memory. mysql_async keeps a connection's prepared
//! statements (at most [`STATEMENTS_KEPT`], the least recently used closed first); only those
//! of at most `statement_cache_bytes` / [`STATEMENTS_KEPT`] bytes of text are kept, a longer one
//! is closed after its run, so what a connection keeps prepared stays within the budget.

use super::mysql_errors::db_error;
use super::STATEMENTS_KEPT;
use crate::cell::{recycle, Cell};
use crate::fair::{FairSlots, Slot};
use crate::sink::RowSink;
use crate::ExecError;
use apijet_core::Value;
use apijet_sql::Statement;
use chrono::{NaiveDate, NaiveTime};
use mysql_async::consts::ColumnType;
use mysql_async::prelude::{Queryable, StatementLike};
use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};
use std::borrow::Cow;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Pools of MySQL/MariaDB connections, one per host of the URL (`h1:p1,h2:p2`). Connections
/// come from the host that last answered; when it refuses connections the next hosts are tried
/// in order and the first that accepts becomes the current one, so an instance moves to a
/// survivor (a Galera node, a promoted replica) without a restart.
pub struct MySqlBackend {
    pools: Vec<Pool>,
    /// Each pool's options, to tell a dead host from a dead pooled connection.
    hosts: Vec<OptsBuilder>,
    current: AtomicUsize,
    /// mysql_async keeps its pool's counts private, so the backend counts for the metrics.
    gauge: Arc<PoolGauge>,
    /// Per host, the connection that stops statements nobody waits for (`KILL QUERY`).
    killers: Vec<Arc<Killer>>,
    /// The server is MariaDB (its regex syntax differs from MySQL 8).
    pub mariadb: bool,
    /// The longest statement text a connection keeps prepared.
    kept_text: AtomicUsize,
    /// The pool's connections, shared fairly between clients (`crate::fair`).
    slots: Arc<FairSlots>,
}

/// Connections handed out and callers waiting for one, for `/metrics`.
#[derive(Default)]
struct PoolGauge {
    in_use: AtomicI64,
    waiting: AtomicI64,
}

/// Counts one in a gauge while it lives.
struct Counted(Arc<PoolGauge>, fn(&PoolGauge) -> &AtomicI64);

impl Counted {
    fn new(gauge: &Arc<PoolGauge>, which: fn(&PoolGauge) -> &AtomicI64) -> Counted {
        which(gauge).fetch_add(1, Ordering::Relaxed);
        Counted(gauge.clone(), which)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::Relaxed);
    }
}

impl MySqlBackend {
    /// Connects (and checks the connection) to the first reachable host of `url`. On a Galera
    /// node every session reads with `wsrep_sync_wait = 1`: a read first catches up with every
    /// write committed anywhere in the cluster, so what one instance acknowledged, another
    /// instance (on another node) reads. Galera applies writes on the other nodes
    /// asynchronously; without it such a read can miss a write acknowledged a moment before.
    pub async fn connect(
        url: &str,
        pool_size: usize,
        timeout_ms: u64,
    ) -> Result<MySqlBackend, ExecError> {
        let target = super::target::Target::of(apijet_core::Engine::MySql, url);
        let hosts = super::split_hosts(url)?;
        let mut init = vec![
            "SET time_zone = '+00:00'".to_string(),
            "SET NAMES utf8mb4".to_string(),
        ];
        let mut errors = Vec::new();
        for (i, host_url) in hosts.iter().enumerate() {
            let opts = builder(host_url, pool_size).map_err(|e| match e {
                ExecError::Connect(why) => target.bad_url(&why),
                other => other,
            })?;
            let (mut conn, timeout) = match first_conn(&opts, &init, timeout_ms).await {
                Ok(c) => c,
                Err(e) => {
                    errors.push((host_of(host_url).to_string(), e.to_string()));
                    continue;
                }
            };
            init.extend(timeout);
            let version: Option<String> = conn
                .query_first("SELECT VERSION()")
                .await
                .map_err(|e| ExecError::Connect(e.to_string()))?;
            let mariadb = version.is_some_and(|v| v.to_ascii_lowercase().contains("mariadb"));
            // Engines that speak the protocol without the variable (TiDB…) are simply not Galera.
            let wsrep: Option<(String, String)> = conn
                .query_first("SHOW VARIABLES LIKE 'wsrep_on'")
                .await
                .unwrap_or(None);
            if wsrep.is_some_and(|(_, v)| v.eq_ignore_ascii_case("ON")) {
                init.push("SET SESSION wsrep_sync_wait = 1".into());
            }
            // Closing it is courtesy; a failure changes nothing.
            let _ = conn.disconnect().await;
            let hosts = hosts
                .iter()
                .map(|u| Ok(builder(u, pool_size)?.init(init.clone())))
                .collect::<Result<Vec<OptsBuilder>, ExecError>>()?;
            return Ok(MySqlBackend {
                pools: hosts.iter().cloned().map(Pool::new).collect(),
                killers: hosts.iter().map(|h| Arc::new(Killer::new(h))).collect(),
                hosts,
                current: AtomicUsize::new(i),
                gauge: Arc::default(),
                mariadb,
                kept_text: AtomicUsize::new(usize::MAX),
                slots: FairSlots::new(pool_size),
            });
        }
        Err(target.failures(&errors))
    }

    /// Runs `op` on the current host's pool; when the host cannot be reached, on the next
    /// ones in turn (each tried once), and remembers the one that answered. A pooled connection
    /// that broke (its server restarted, say) fails `op` like a dead host does; the host is
    /// left only when a fresh connection to it fails too.
    async fn failover<'a, T, F, Fut>(&'a self, op: F) -> Result<(T, usize), ExecError>
    where
        F: Fn(&'a Pool) -> Fut,
        Fut: std::future::Future<Output = Result<T, mysql_async::Error>>,
    {
        let start = self.current.load(Ordering::Relaxed);
        let n = self.pools.len();
        let mut last = None;
        for k in (0..n).map(|i| (start + i) % n) {
            match op(&self.pools[k]).await {
                Ok(v) => {
                    if k != start {
                        self.current.store(k, Ordering::Relaxed);
                        tracing::warn!(host = k, "database host changed after a failed connection");
                    }
                    return Ok((v, k));
                }
                Err(e) if unreachable(&e) => {
                    if n > 1 && self.alive(k).await {
                        return Err(db_error(e));
                    }
                    last = Some(e);
                }
                Err(e) => return Err(db_error(e)),
            }
        }
        Err(ExecError::Connect(last.map_or_else(
            || "no database host".into(),
            |e| e.to_string(),
        )))
    }

    /// A fresh connection to host `k` succeeds (only asked after a failure).
    async fn alive(&self, k: usize) -> bool {
        match mysql_async::Conn::new(self.hosts[k].clone()).await {
            Ok(c) => {
                let _ = c.disconnect().await;
                true
            }
            Err(_) => false,
        }
    }

    /// Keeps prepared only statements of at most `bytes` / [`STATEMENTS_KEPT`] bytes of
    /// text (`statement_cache_bytes`).
    pub fn set_statement_cache_bytes(&self, bytes: usize) {
        self.kept_text
            .store(bytes / STATEMENTS_KEPT, Ordering::Relaxed);
    }

    fn longest_kept(&self) -> usize {
        self.kept_text.load(Ordering::Relaxed)
    }

    /// Connections in use and callers waiting for one.
    pub fn pool_status(&self) -> (i64, i64) {
        let g = &self.gauge;
        (
            g.in_use.load(Ordering::Relaxed),
            g.waiting.load(Ordering::Relaxed),
        )
    }

    /// The client's fair share of the pool (`crate::fair`).
    async fn slot(&self) -> Slot {
        self.slots.acquire(crate::cancel::current().holder()).await
    }

    async fn conn(&self) -> Result<(mysql_async::Conn, usize, Counted), ExecError> {
        let waiting = Counted::new(&self.gauge, |g| &g.waiting);
        let (conn, host) = self.failover(Pool::get_conn).await?;
        drop(waiting);
        Ok((conn, host, Counted::new(&self.gauge, |g| &g.in_use)))
    }

    /// Runs a statement, feeding every row to `sink`.
    pub async fn fetch<S: RowSink>(
        &self,
        stmt: &Statement,
        sink: &mut S,
    ) -> Result<u64, ExecError> {
        let _slot = self.slot().await;
        let (conn, host, in_use) = self.conn().await?;
        let mut running = Running {
            conn: Some((conn, in_use)),
            killer: Arc::clone(&self.killers[host]),
        };
        let result = match &mut running.conn {
            Some((conn, _)) => fetch_on(conn, self.longest_kept(), stmt, sink).await,
            None => Err(ExecError::Connect("no connection".into())),
        };
        if statement_ended(&result) {
            running.conn.take();
        }
        result
    }

    /// Starts a transaction on a connection of its own (rolled back if dropped unfinished).
    pub async fn begin(&self) -> Result<MySqlTx, ExecError> {
        let slot = self.slot().await;
        let waiting = Counted::new(&self.gauge, |g| &g.waiting);
        let (tx, host) = self
            .failover(|p| p.start_transaction(mysql_async::TxOpts::default()))
            .await?;
        drop(waiting);
        Ok(MySqlTx {
            _slot: slot,
            tx: Some(tx),
            running: false,
            longest_kept: self.longest_kept(),
            killer: Arc::clone(&self.killers[host]),
            _in_use: Counted::new(&self.gauge, |g| &g.in_use),
        })
    }

    /// Runs statements that return no rows (schema set-up, demo data).
    pub async fn execute_script(&self, statements: &[String]) -> Result<(), ExecError> {
        let (mut conn, _host, _in_use) = self.conn().await?;
        for s in statements {
            conn.query_drop(s.as_str()).await.map_err(db_error)?;
        }
        Ok(())
    }
}

/// The pool options of one host.
fn builder(url: &str, pool_size: usize) -> Result<OptsBuilder, ExecError> {
    let opts = Opts::from_url(url).map_err(|e| ExecError::Connect(e.to_string()))?;
    // min = max: mysql_async closes connections above the minimum as soon as they are
    // returned (the idle TTL defaults to zero), which under load meant a new connection,
    // its set-up and fresh prepares for most requests.
    let constraints = PoolConstraints::new(pool_size.max(1), pool_size.max(1))
        .ok_or_else(|| ExecError::Connect("invalid pool size".into()))?;
    Ok(OptsBuilder::from_opts(opts)
        // No reset when a connection goes back to the pool: a reset drops the prepared-statement
        // cache, and apijet keeps no session state beyond the init commands.
        .pool_opts(
            PoolOpts::default()
                .with_constraints(constraints)
                .with_reset_connection(false),
        )
        .stmt_cache_size(STATEMENTS_KEPT)
        // An UPDATE that sets a value already there still matched its row: count matched
        // rows, as PostgreSQL and SQLite do, so such a write is not mistaken for "no row".
        .client_found_rows(true))
}

/// A first connection to one host with `init`, and the statement-timeout command that worked
/// (MariaDB spells it max_statement_time, MySQL max_execution_time).
async fn first_conn(
    builder: &OptsBuilder,
    init: &[String],
    timeout_ms: u64,
) -> Result<(mysql_async::Conn, Option<String>), mysql_async::Error> {
    let with = |t: Option<&String>| {
        let mut all = init.to_vec();
        all.extend(t.cloned());
        mysql_async::Conn::new(builder.clone().init(all))
    };
    if timeout_ms == 0 {
        return Ok((with(None).await?, None));
    }
    let mariadb = format!(
        "SET SESSION max_statement_time = {}",
        timeout_ms as f64 / 1000.0
    );
    match with(Some(&mariadb)).await {
        Ok(c) => Ok((c, Some(mariadb))),
        Err(e) if unreachable(&e) => Err(e),
        Err(_) => {
            let mysql = format!("SET SESSION max_execution_time = {timeout_ms}");
            Ok((with(Some(&mysql)).await?, Some(mysql)))
        }
    }
}

/// The host cannot serve: refused or broken connection, shutting down, or a Galera node
/// outside the primary component. Worth trying the next host.
fn unreachable(e: &mysql_async::Error) -> bool {
    match e {
        mysql_async::Error::Io(_) => true,
        // 1047 WSREP not ready, 1053 shutdown in progress, 1927 connection killed.
        mysql_async::Error::Server(se) => matches!(se.code, 1047 | 1053 | 1927),
        _ => false,
    }
}

fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

/// Runs a statement on `q`, feeding every row to `sink`; one whose text is longer than
/// `longest_kept` is closed after its run.
async fn fetch_on<Q: Queryable, S: RowSink>(
    q: &mut Q,
    longest_kept: usize,
    stmt: &Statement,
    sink: &mut S,
) -> Result<u64, ExecError> {
    if stmt.sql.len() <= longest_kept {
        return rows_of(q, stmt.sql.as_str(), stmt, sink).await;
    }
    let prepared = q.prep(stmt.sql.as_str()).await.map_err(db_error)?;
    let result = rows_of(q, &prepared, stmt, sink).await;
    if statement_ended(&result) {
        q.close(prepared).await.map_err(db_error)?;
    }
    result
}

/// Runs `prepared` (a text, or a statement prepared already) with the binds of `stmt`.
async fn rows_of<Q: Queryable, P: StatementLike, S: RowSink>(
    q: &mut Q,
    prepared: P,
    stmt: &Statement,
    sink: &mut S,
) -> Result<u64, ExecError> {
    let params: Vec<mysql_async::Value> = stmt.binds.iter().map(param).collect();
    let mut result = q
        .exec_iter(prepared, mysql_async::Params::Positional(params))
        .await
        .map_err(db_error)?;
    let columns = result.columns().unwrap_or_else(|| Vec::new().into());
    let names: Vec<String> = columns.iter().map(|c| c.name_str().into_owned()).collect();
    let types: Vec<ColumnType> = columns.iter().map(|c| c.column_type()).collect();
    let binary: Vec<bool> = columns.iter().map(|c| c.character_set() == 63).collect();
    sink.columns(names.iter().map(String::as_str));
    let mut spare: Vec<Cell<'static>> = Vec::with_capacity(names.len());
    let mut n = 0u64;
    while let Some(row) = result.next().await.map_err(db_error)? {
        let mut cells: Vec<Cell<'_>> = recycle(spare);
        for i in 0..names.len() {
            let v = row.as_ref(i).unwrap_or(&mysql_async::Value::NULL);
            cells.push(cell(v, types[i], binary[i]));
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

/// A pooled connection with a statement under way (see [`crate::cancel`]). Dropped before the
/// statement ended (its request was dropped, its deadline passed, its sink stopped reading),
/// its connection is killed from another one (`KILL CONNECTION`, which also stops a statement
/// that had not started yet) and leaves the pool: a mysql_async future dropped midway leaves
/// its connection in no state to be used again.
struct Running {
    conn: Option<(mysql_async::Conn, Counted)>,
    killer: Arc<Killer>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some((conn, in_use)) = self.conn.take() {
            let killer = Arc::clone(&self.killer);
            spawn_detached(async move {
                killer.kill(conn.id()).await;
                // Marks it closed, so the pool discards it instead of lending it again.
                let _ = conn.disconnect().await;
                drop(in_use);
            });
        }
    }
}

/// Runs `work` on the runtime, if there is one (a drop outside it has nothing to stop).
fn spawn_detached(work: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(work);
    }
}

/// Whether a fetch's statement is over: it ran to its end or the server refused it. A fetch
/// that stopped reading (a client gone, a budget spent) left it running.
fn statement_ended(result: &Result<u64, ExecError>) -> bool {
    matches!(result, Ok(_) | Err(ExecError::Db { .. }))
}

/// One connection per host that ends other connections (a connection's id is its host's own,
/// so the kill must go to the same host). Opened at the first kill; kills queue on it.
struct Killer {
    host: OptsBuilder,
    conn: tokio::sync::Mutex<Option<mysql_async::Conn>>,
}

impl Killer {
    fn new(host: &OptsBuilder) -> Killer {
        Killer {
            host: host.clone(),
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// Ends connection `id` and whatever it runs (`KILL CONNECTION`).
    async fn kill(&self, id: u32) {
        let mut slot = self.conn.lock().await;
        // A kill connection that broke since its last use is opened again, once.
        for _ in 0..2 {
            if slot.is_none() {
                match mysql_async::Conn::new(self.host.clone()).await {
                    Ok(c) => *slot = Some(c),
                    Err(e) => {
                        tracing::warn!("cannot stop a statement nobody waits for: {e}");
                        return;
                    }
                }
            }
            let Some(conn) = slot.as_mut() else {
                return;
            };
            match conn.query_drop(format!("KILL CONNECTION {id}")).await {
                Ok(()) => return,
                // 1094: the connection ended meanwhile.
                Err(mysql_async::Error::Server(e)) if e.code == 1094 => return,
                Err(_) => *slot = None,
            }
        }
    }
}

/// An open transaction; mysql_async rolls it back if it is dropped unfinished. Dropped while a
/// statement runs, its connection is killed (which rolls back too).
pub struct MySqlTx {
    /// Its share of the pool, held until it ends.
    _slot: Slot,
    tx: Option<mysql_async::Transaction<'static>>,
    /// A statement was started and has not ended.
    running: bool,
    /// The longest statement text kept prepared.
    longest_kept: usize,
    killer: Arc<Killer>,
    _in_use: Counted,
}

impl MySqlTx {
    fn tx(&mut self) -> Result<&mut mysql_async::Transaction<'static>, ExecError> {
        self.tx
            .as_mut()
            .ok_or(ExecError::Connect("the transaction is closed".into()))
    }

    /// Runs a statement; returns the rows it changed.
    pub async fn execute(&mut self, stmt: &Statement) -> Result<u64, ExecError> {
        let params = mysql_async::Params::Positional(stmt.binds.iter().map(param).collect());
        self.running = true;
        let longest_kept = self.longest_kept;
        let tx = self.tx()?;
        let result = if stmt.sql.len() <= longest_kept {
            tx.exec_drop(stmt.sql.as_str(), params).await
        } else {
            let prepared = tx.prep(stmt.sql.as_str()).await.map_err(db_error)?;
            let ran = tx.exec_drop(&prepared, params).await;
            if ran.is_ok() {
                tx.close(prepared).await.map_err(db_error)?;
            }
            ran
        };
        let result = result.map_err(db_error).map(|()| tx.affected_rows());
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
        let longest_kept = self.longest_kept;
        let result = fetch_on(self.tx()?, longest_kept, stmt, sink).await;
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
        match self.tx.take() {
            Some(tx) => tx.commit().await.map_err(db_error),
            None => Err(ExecError::Connect("the transaction is closed".into())),
        }
    }

    /// Rolls back.
    pub async fn rollback(mut self) -> Result<(), ExecError> {
        if self.running {
            // Dropping kills the statement; mysql_async then rolls back.
            return Ok(());
        }
        match self.tx.take() {
            Some(tx) => tx.rollback().await.map_err(db_error),
            None => Ok(()),
        }
    }
}

impl Drop for MySqlTx {
    fn drop(&mut self) {
        if let (true, Some(tx)) = (self.running, self.tx.take()) {
            let killer = Arc::clone(&self.killer);
            spawn_detached(async move {
                killer.kill(tx.id()).await;
                // The pool's clean-up (a rollback) fails on the killed connection, which it
                // then discards.
                drop(tx);
            });
        }
    }
}

fn param(v: &Value) -> mysql_async::Value {
    match v {
        Value::Null => mysql_async::Value::NULL,
        Value::Bool(b) => mysql_async::Value::Int(i64::from(*b)),
        Value::Int(i) => mysql_async::Value::Int(*i),
        Value::Float(f) => mysql_async::Value::Double(*f),
        Value::Text(s) => mysql_async::Value::Bytes(s.as_bytes().to_vec()),
    }
}

fn cell(v: &mysql_async::Value, ty: ColumnType, binary: bool) -> Cell<'_> {
    use mysql_async::Value as V;
    match v {
        V::NULL => Cell::Null,
        V::Int(i) => Cell::Int(*i),
        V::UInt(u) => match i64::try_from(*u) {
            Ok(i) => Cell::Int(i),
            Err(_) => Cell::UInt(*u),
        },
        V::Float(f) => Cell::Float(f64::from(*f)),
        V::Double(d) => Cell::Float(*d),
        V::Bytes(b) => match ty {
            ColumnType::MYSQL_TYPE_NEWDECIMAL | ColumnType::MYSQL_TYPE_DECIMAL => {
                Cell::Decimal(String::from_utf8_lossy(b))
            }
            ColumnType::MYSQL_TYPE_JSON => Cell::Json(String::from_utf8_lossy(b)),
            _ if binary => Cell::Bytes(Cow::Borrowed(b)),
            _ => Cell::Text(String::from_utf8_lossy(b)),
        },
        V::Date(y, m, d, h, mi, s, us) => {
            let date = NaiveDate::from_ymd_opt(i32::from(*y), u32::from(*m), u32::from(*d));
            match (ty, date) {
                (ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE, Some(d)) => {
                    Cell::Date(d)
                }
                (_, Some(d)) => d
                    .and_hms_micro_opt(u32::from(*h), u32::from(*mi), u32::from(*s), *us)
                    .map(Cell::DateTime)
                    .unwrap_or(Cell::Null),
                // MySQL's zero date has no calendar value.
                (_, None) => Cell::Null,
            }
        }
        V::Time(neg, days, h, m, s, us) => {
            if *neg || *days > 0 {
                let hours = *days * 24 + u32::from(*h);
                Cell::Text(Cow::Owned(format!(
                    "{}{hours:02}:{m:02}:{s:02}",
                    if *neg { "-" } else { "" }
                )))
            } else {
                NaiveTime::from_hms_micro_opt(u32::from(*h), u32::from(*m), u32::from(*s), *us)
                    .map(Cell::Time)
                    .unwrap_or(Cell::Null)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_gauge_counts_what_is_held_and_forgets_it_when_dropped() {
        let gauge = Arc::new(PoolGauge::default());
        let waiting = Counted::new(&gauge, |g| &g.waiting);
        let a = Counted::new(&gauge, |g| &g.in_use);
        let b = Counted::new(&gauge, |g| &g.in_use);
        assert_eq!(gauge.in_use.load(Ordering::Relaxed), 2);
        assert_eq!(gauge.waiting.load(Ordering::Relaxed), 1);
        drop((waiting, a));
        assert_eq!(gauge.in_use.load(Ordering::Relaxed), 1);
        assert_eq!(gauge.waiting.load(Ordering::Relaxed), 0);
        drop(b);
        assert_eq!(gauge.in_use.load(Ordering::Relaxed), 0);
    }
}
