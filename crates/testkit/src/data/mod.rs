//! Data generators. Rows are generated inside the database (`INSERT … SELECT` over a number
//! series) in chunks, with a progress bar on stderr: 2,000,000 rows take well under a minute
//! per table on PostgreSQL and MariaDB, and the client sends no row data at all.
//!
//! * [`t_event`]: the big event log of the list scenario.
//! * [`sku`]: `purch_sku_master`, the point-lookup table keyed by a uuid-like `sku_id`.
//! * [`demo`]: the demo dataset (`apijet demo`) scaled up: users, moments, comments.

pub mod demo;
pub mod sku;
pub mod t_event;

use crate::engine::{DbConn, Engine};
use std::io::{IsTerminal, Write};
use std::time::Instant;

/// A one-line progress bar on stderr (redrawn in place on a terminal, every 25 % otherwise).
pub struct Progress {
    label: String,
    total: u64,
    start: Instant,
    tty: bool,
    last_quarter: u64,
}

impl Progress {
    pub fn new(label: impl Into<String>, total: u64) -> Progress {
        let p = Progress {
            label: label.into(),
            total: total.max(1),
            start: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last_quarter: 0,
        };
        p.draw(0);
        p
    }

    pub fn set(&mut self, done: u64) {
        let quarter = done * 4 / self.total;
        if self.tty || quarter > self.last_quarter || done >= self.total {
            self.last_quarter = quarter;
            self.draw(done);
        }
    }

    fn draw(&self, done: u64) {
        let width = 30;
        let filled = (done.min(self.total) * width / self.total) as usize;
        let line = format!(
            "[bench] {:<28} [{}{}] {:>3}% {}/{} rows {:.1} s",
            self.label,
            "#".repeat(filled),
            ".".repeat(width as usize - filled),
            done * 100 / self.total,
            done,
            self.total,
            self.start.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr();
        if self.tty {
            let _ = write!(err, "\r{line}");
            if done >= self.total {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }
}

/// A derived table `s` with one column `g` holding `from..=to`.
pub fn series(engine: Engine, from: u64, to: u64) -> String {
    match engine {
        Engine::Postgres => {
            format!("(SELECT g FROM generate_series({from}::bigint, {to}::bigint) AS g) AS s")
        }
        Engine::Mariadb => format!("(SELECT seq AS g FROM seq_{from}_to_{to}) AS s"),
        Engine::Sqlite => format!(
            "(WITH RECURSIVE c(g) AS (SELECT {from} UNION ALL SELECT g + 1 FROM c WHERE g < {to}) \
             SELECT g FROM c) AS s"
        ),
    }
}

/// Fails early with a clear message when MariaDB lacks the Sequence engine (`seq_1_to_N`).
pub async fn check_series(conn: &mut DbConn, engine: Engine) -> Result<(), String> {
    match engine {
        Engine::Mariadb => conn
            .count("SELECT count(*) FROM seq_1_to_2")
            .await
            .map(drop)
            .map_err(|e| format!("MariaDB's Sequence engine (seq_1_to_N) is needed: {e}")),
        Engine::Postgres | Engine::Sqlite => Ok(()),
    }
}

/// Runs `insert(from, to)` for `total` rows (`0..total`) in chunks, with a progress bar.
pub async fn fill(
    conn: &mut DbConn,
    label: &str,
    total: u64,
    chunk: u64,
    insert: impl Fn(u64, u64) -> String,
) -> Result<(), String> {
    let mut bar = Progress::new(label, total);
    let mut done = 0;
    while done < total {
        let to = (done + chunk).min(total);
        conn.batch(&insert(done, to - 1)).await?;
        done = to;
        bar.set(done);
    }
    Ok(())
}

/// What follows `CREATE TABLE name (…)` on `engine`: MariaDB's storage engine and character set.
pub fn table_options(engine: Engine) -> &'static str {
    match engine {
        Engine::Mariadb => " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        Engine::Postgres | Engine::Sqlite => "",
    }
}

/// Fills the created `table` with `rows` rows of `INSERT … SELECT {select} FROM` a series `g`
/// (chunks of 100,000, with a progress bar), runs `index`, refreshes the statistics and
/// registers the table in `Access` as `alias` (row `access_id`).
#[allow(clippy::too_many_arguments)]
pub async fn fill_table(
    conn: &mut DbConn,
    engine: Engine,
    table: &str,
    rows: u64,
    select: &str,
    index: &str,
    access_id: i64,
    alias: &str,
) -> Result<(), String> {
    let label = format!("{} {table}", engine.name());
    fill(conn, &label, rows, 100_000, |from, to| {
        format!(
            "INSERT INTO {table} SELECT {select} FROM {}",
            series(engine, from, to)
        )
    })
    .await?;
    conn.batch(index).await?;
    analyze(conn, engine, table).await?;
    register(conn, engine, access_id, table, alias).await
}

/// Column types per engine.
pub fn ty(engine: Engine, t: &str) -> String {
    match (engine, t) {
        (Engine::Sqlite, "pk") => "INTEGER PRIMARY KEY".into(),
        (_, "pk") => "BIGINT NOT NULL PRIMARY KEY".into(),
        (Engine::Sqlite, "bigint" | "int" | "tinyint") => "INTEGER".into(),
        (Engine::Postgres, "tinyint") => "SMALLINT".into(),
        (Engine::Postgres, "datetime") => "TIMESTAMP".into(),
        (Engine::Sqlite, "datetime") => "DATETIME".into(),
        (_, t) => t.to_uppercase(),
    }
}

/// A timestamp `secs` seconds after 2024-01-01 00:00:00 UTC, from an integer SQL expression.
pub fn datetime(engine: Engine, secs: &str) -> String {
    match engine {
        Engine::Postgres => {
            format!("(TIMESTAMP '2024-01-01 00:00:00' + ({secs}) * INTERVAL '1 second')")
        }
        Engine::Mariadb => format!("(TIMESTAMP '2024-01-01 00:00:00' + INTERVAL ({secs}) SECOND)"),
        Engine::Sqlite => format!("datetime(1704067200 + ({secs}), 'unixepoch')"),
    }
}

/// Registers `table` in `Access` as API name `alias`, readable by every role.
pub async fn register(
    conn: &mut DbConn,
    engine: Engine,
    id: i64,
    table: &str,
    alias: &str,
) -> Result<(), String> {
    let q = |s: &str| engine.ident(s);
    let all = r#"'["UNKNOWN","LOGIN","CONTACT","CIRCLE","OWNER","ADMIN"]'"#;
    conn.batch(&format!(
        "INSERT INTO {} ({}, {}, {}, {}, {}) VALUES ({id}, '{table}', '{alias}', {all}, {all})",
        q("Access"),
        q("id"),
        q("name"),
        q("alias"),
        q("get"),
        q("head"),
    ))
    .await
}

/// Refreshes the planner's statistics of `table`.
pub async fn analyze(conn: &mut DbConn, engine: Engine, table: &str) -> Result<(), String> {
    let t = engine.ident(table);
    match engine {
        Engine::Postgres => conn.batch(&format!("VACUUM ANALYZE {t}")).await,
        Engine::Mariadb => conn.batch(&format!("ANALYZE TABLE {t}")).await,
        Engine::Sqlite => conn.batch(&format!("ANALYZE {t}")).await,
    }
}
