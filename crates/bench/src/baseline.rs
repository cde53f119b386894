//! Baselines: the same work without apijet, measured in the same run.
//!
//! * [`RawWork`] driven by [`run_raw`]: our small raw client over the drivers apijet itself
//!   uses (tokio-postgres, mysql_async, rusqlite), prepared statements, closed loop, one
//!   connection per client. It is the MariaDB and SQLite baseline everywhere and the
//!   PostgreSQL baseline where pgbench has no natural script (batched updates, inserts).
//! * [`run_pgbench`]: PostgreSQL's own load driver with a custom script (`-M prepared`), per
//!   transaction latencies from its `-l` log.
//! * [`time_command`]: the engines' command-line clients reading a big result to /dev/null
//!   (`psql COPY … TO STDOUT`, `mariadb --quick`, `sqlite3`).

mod clients;
pub use clients::{client_reader, raw_read, run_pgbench, time_command};

use crate::load::Measured;
use crate::stats::summarize_us;
use apijet_testkit::engine::{Database, DbConn, Engine};
use apijet_testkit::Rng;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A key of a lookup.
#[derive(Clone, Debug)]
pub enum Key {
    Int(i64),
    Text(String),
}

/// One transaction of the raw client, repeated with random keys.
#[derive(Clone, Debug)]
pub enum RawWork {
    /// `per_tx` lookups `SELECT * FROM table WHERE column = ? LIMIT 1`, one key each.
    Lookup {
        table: String,
        column: String,
        keys: Arc<Vec<Key>>,
        per_tx: usize,
    },
    /// `UPDATE "Comment" SET content = ? WHERE id = ? AND "userId" = ?` for each id of a
    /// random set (ids sorted, as in the apijet requests), in one transaction.
    Update {
        sets: Arc<Vec<Vec<i64>>>,
        user_id: i64,
    },
    /// One multi-row `INSERT INTO "Comment" (id, "userId", "momentId", content)` of `rows` rows,
    /// each with a random `momentId` of `moment_id .. moment_id + moments` (as apijet's bodies
    /// have: where the rows land in the `momentId` index decides how many pages a batch
    /// writes).
    Insert {
        rows: usize,
        next_id: Arc<AtomicI64>,
        user_id: i64,
        moment_id: i64,
        moments: u64,
    },
}

impl RawWork {
    /// The SQL of the statement the transaction repeats.
    fn sql(&self, engine: Engine) -> String {
        let q = |s: &str| engine.ident(s);
        match self {
            RawWork::Lookup { table, column, .. } => format!(
                "SELECT * FROM {} WHERE {} = {} LIMIT 1",
                q(table),
                q(column),
                engine.param(1)
            ),
            RawWork::Update { .. } => format!(
                "UPDATE {} SET {} = {} WHERE {} = {} AND {} = {}",
                q("Comment"),
                q("content"),
                engine.param(1),
                q("id"),
                engine.param(2),
                q("userId"),
                engine.param(3)
            ),
            RawWork::Insert { rows, .. } => {
                let mut sql = format!(
                    "INSERT INTO {} ({}, {}, {}, {}) VALUES ",
                    q("Comment"),
                    q("id"),
                    q("userId"),
                    q("momentId"),
                    q("content")
                );
                for r in 0..*rows {
                    if r > 0 {
                        sql.push(',');
                    }
                    let p = |i: usize| engine.param(r * 4 + i);
                    sql.push_str(&format!("({},{},{},{})", p(1), p(2), p(3), p(4)));
                }
                sql
            }
        }
    }

    /// What the raw client is, for the report.
    pub fn label(&self, engine: Engine) -> String {
        let driver = match engine {
            Engine::Postgres => "tokio-postgres",
            Engine::Mariadb => "mysql_async",
            Engine::Sqlite => "rusqlite, in-process",
        };
        format!("raw client ({driver}, prepared, closed loop)")
    }
}

/// One transaction's parameters, drawn from `rng`.
enum Params {
    One(Key),
    Many(Vec<Key>),
    Updates(Vec<(String, i64)>, i64),
    Insert(Vec<(i64, i64, i64, String)>),
}

fn draw(work: &RawWork, rng: &mut Rng) -> Params {
    match work {
        RawWork::Lookup { keys, per_tx, .. } => {
            let mut pick = || keys[rng.below(keys.len() as u64) as usize].clone();
            if *per_tx == 1 {
                Params::One(pick())
            } else {
                Params::Many((0..*per_tx).map(|_| pick()).collect())
            }
        }
        RawWork::Update { sets, user_id } => {
            let set = &sets[rng.below(sets.len() as u64) as usize];
            let stamp = rng.below(1_000_000);
            Params::Updates(
                set.iter()
                    .map(|&id| (format!("raw update {stamp}"), id))
                    .collect(),
                *user_id,
            )
        }
        RawWork::Insert {
            rows,
            next_id,
            user_id,
            moment_id,
            moments,
        } => {
            let first = next_id.fetch_add(*rows as i64, Ordering::Relaxed);
            Params::Insert(
                (0..*rows as i64)
                    .map(|i| {
                        (
                            first + i,
                            *user_id,
                            *moment_id + rng.below((*moments).max(1)) as i64,
                            format!("raw insert {}", first + i),
                        )
                    })
                    .collect(),
            )
        }
    }
}

/// Runs `work` from `clients` connections for `duration` (SQLite: at most 4 threads, since an
/// in-process engine gains nothing from more). Connections are opened before the clock starts.
pub async fn run_raw(
    db: &Database,
    work: &RawWork,
    clients: usize,
    duration: Duration,
) -> Result<Measured, String> {
    let sql = work.sql(db.engine);
    let clients = match db.engine {
        Engine::Sqlite => clients.clamp(1, 4),
        _ => clients.max(1),
    };
    let mut conns = Vec::with_capacity(clients);
    for _ in 0..clients {
        conns.push(DbConn::connect(db.engine, &db.url).await?);
    }
    let start = Instant::now();
    let deadline = start + duration;
    let mut handles = Vec::new();
    for (i, conn) in conns.into_iter().enumerate() {
        let (work, sql) = (work.clone(), sql.clone());
        let seed = 0x5EED ^ ((i as u64) << 24);
        handles.push(match conn {
            DbConn::Lite(c) => Worker::Thread(std::thread::spawn(move || {
                lite_loop(c, &sql, &work, seed, deadline)
            })),
            other => Worker::Task(tokio::spawn(async move {
                async_loop(other, &sql, &work, seed, deadline).await
            })),
        });
    }
    let (mut lat, mut errors, mut first_error) = (Vec::new(), 0u64, None);
    for h in handles {
        let r = match h {
            Worker::Thread(t) => tokio::task::spawn_blocking(move || t.join())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|_| "a raw client thread panicked".to_string())?,
            Worker::Task(t) => t.await.map_err(|e| e.to_string())?,
        };
        lat.extend(r.0);
        errors += r.1;
        if first_error.is_none() {
            first_error = r.2;
        }
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let samples = lat.len() as u64;
    if samples > 0 && errors == samples {
        return Err(format!(
            "every raw transaction failed: {}",
            first_error.unwrap_or_default()
        ));
    }
    Ok(Measured {
        samples,
        errors,
        latency: summarize_us(&mut lat),
        req_s: samples.saturating_sub(errors) as f64 / secs,
        bytes_s: 0.0,
        tool: format!("{}, {clients} connections", work.label(db.engine)),
        mode: "closed",
    })
}

enum Worker {
    Thread(std::thread::JoinHandle<LoopResult>),
    Task(tokio::task::JoinHandle<LoopResult>),
}

/// Latencies (µs), failed transactions, the first error.
type LoopResult = (Vec<u64>, u64, Option<String>);

async fn async_loop(
    mut conn: DbConn,
    sql: &str,
    work: &RawWork,
    seed: u64,
    deadline: Instant,
) -> LoopResult {
    let mut rng = Rng::new(seed);
    let (mut lat, mut errors, mut first) = (Vec::new(), 0u64, None);
    match &mut conn {
        DbConn::Pg(c) => {
            let stmt = match c.prepare(sql).await {
                Ok(s) => s,
                Err(e) => return (vec![0], 1, Some(e.to_string())),
            };
            while Instant::now() < deadline {
                let p = draw(work, &mut rng);
                let t0 = Instant::now();
                let r = pg_tx(c, &stmt, p).await;
                lat.push(t0.elapsed().as_micros() as u64);
                if let Err(e) = r {
                    errors += 1;
                    first.get_or_insert(e.to_string());
                }
            }
        }
        DbConn::My(c) => {
            use mysql_async::prelude::Queryable;
            let stmt = match c.prep(sql).await {
                Ok(s) => s,
                Err(e) => return (vec![0], 1, Some(e.to_string())),
            };
            while Instant::now() < deadline {
                let p = draw(work, &mut rng);
                let t0 = Instant::now();
                let r = my_tx(c, &stmt, p).await;
                lat.push(t0.elapsed().as_micros() as u64);
                if let Err(e) = r {
                    errors += 1;
                    first.get_or_insert(e.to_string());
                }
            }
        }
        DbConn::Lite(_) => {}
    }
    (lat, errors, first)
}

async fn pg_tx(
    c: &tokio_postgres::Client,
    stmt: &tokio_postgres::Statement,
    p: Params,
) -> Result<(), tokio_postgres::Error> {
    use tokio_postgres::types::ToSql;
    let one = |k: &Key| -> Box<dyn ToSql + Sync + Send> {
        match k {
            Key::Int(i) => Box::new(*i),
            Key::Text(s) => Box::new(s.clone()),
        }
    };
    match p {
        Params::One(k) => {
            let v = one(&k);
            c.query_opt(stmt, &[v.as_ref()]).await?;
        }
        Params::Many(keys) => {
            for k in &keys {
                let v = one(k);
                c.query_opt(stmt, &[v.as_ref()]).await?;
            }
        }
        Params::Updates(items, user) => {
            c.batch_execute("BEGIN").await?;
            for (content, id) in &items {
                if let Err(e) = c.execute(stmt, &[content, id, &user]).await {
                    let _ = c.batch_execute("ROLLBACK").await;
                    return Err(e);
                }
            }
            c.batch_execute("COMMIT").await?;
        }
        Params::Insert(rows) => {
            let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(rows.len() * 4);
            for (id, user, moment, content) in &rows {
                params.push(id);
                params.push(user);
                params.push(moment);
                params.push(content);
            }
            c.execute(stmt, &params).await?;
        }
    }
    Ok(())
}

async fn my_tx(
    c: &mut mysql_async::Conn,
    stmt: &mysql_async::Statement,
    p: Params,
) -> Result<(), mysql_async::Error> {
    use mysql_async::prelude::Queryable;
    use mysql_async::Value;
    let one = |k: &Key| match k {
        Key::Int(i) => Value::Int(*i),
        Key::Text(s) => Value::Bytes(s.as_bytes().to_vec()),
    };
    match p {
        Params::One(k) => {
            let _: Option<mysql_async::Row> = c.exec_first(stmt, vec![one(&k)]).await?;
        }
        Params::Many(keys) => {
            for k in &keys {
                let _: Option<mysql_async::Row> = c.exec_first(stmt, vec![one(k)]).await?;
            }
        }
        Params::Updates(items, user) => {
            c.query_drop("START TRANSACTION").await?;
            for (content, id) in items {
                let r = c
                    .exec_drop(
                        stmt,
                        vec![
                            Value::Bytes(content.into_bytes()),
                            Value::Int(id),
                            Value::Int(user),
                        ],
                    )
                    .await;
                if let Err(e) = r {
                    let _ = c.query_drop("ROLLBACK").await;
                    return Err(e);
                }
            }
            c.query_drop("COMMIT").await?;
        }
        Params::Insert(rows) => {
            let mut params = Vec::with_capacity(rows.len() * 4);
            for (id, user, moment, content) in rows {
                params.extend([
                    Value::Int(id),
                    Value::Int(user),
                    Value::Int(moment),
                    Value::Bytes(content.into_bytes()),
                ]);
            }
            c.exec_drop(stmt, params).await?;
        }
    }
    Ok(())
}

fn lite_loop(
    conn: rusqlite::Connection,
    sql: &str,
    work: &RawWork,
    seed: u64,
    deadline: Instant,
) -> LoopResult {
    let mut rng = Rng::new(seed);
    let (mut lat, mut errors, mut first) = (Vec::new(), 0u64, None);
    while Instant::now() < deadline {
        let p = draw(work, &mut rng);
        let t0 = Instant::now();
        let r = lite_tx(&conn, sql, p);
        lat.push(t0.elapsed().as_micros() as u64);
        if let Err(e) = r {
            errors += 1;
            first.get_or_insert(e.to_string());
        }
    }
    (lat, errors, first)
}

fn lite_tx(c: &rusqlite::Connection, sql: &str, p: Params) -> rusqlite::Result<()> {
    use rusqlite::types::Value;
    let one = |k: &Key| match k {
        Key::Int(i) => Value::Integer(*i),
        Key::Text(s) => Value::Text(s.clone()),
    };
    let mut stmt = c.prepare_cached(sql)?;
    let mut lookup = |k: &Key| -> rusqlite::Result<()> {
        let mut rows = stmt.query([one(k)])?;
        while rows.next()?.is_some() {}
        Ok(())
    };
    match p {
        Params::One(k) => lookup(&k)?,
        Params::Many(keys) => {
            for k in &keys {
                lookup(k)?;
            }
        }
        Params::Updates(items, user) => {
            drop(stmt);
            c.execute_batch("BEGIN IMMEDIATE")?;
            let mut stmt = c.prepare_cached(sql)?;
            for (content, id) in items {
                if let Err(e) = stmt.execute(rusqlite::params![content, id, user]) {
                    let _ = c.execute_batch("ROLLBACK");
                    return Err(e);
                }
            }
            c.execute_batch("COMMIT")?;
        }
        Params::Insert(rows) => {
            let mut params: Vec<Value> = Vec::with_capacity(rows.len() * 4);
            for (id, user, moment, content) in rows {
                params.extend([
                    Value::Integer(id),
                    Value::Integer(user),
                    Value::Integer(moment),
                    Value::Text(content),
                ]);
            }
            stmt.execute(rusqlite::params_from_iter(params))?;
        }
    }
    Ok(())
}
