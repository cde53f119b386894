//! Reading the schema (at start, and again at `/reload` and SIGHUP) costs the same beside many
//! other databases. MariaDB's `information_schema` builds the rows of the databases and tables
//! a lookup names with constants, and of every database on the server otherwise, opening each
//! table's definition: a lookup that matched CHECK_CONSTRAINTS to each column through a
//! correlated subquery read the whole server once per column (1.4–3.9 s at every start beside
//! 100 other databases, with a "slow statement" warning; a few milliseconds now).
//!
//! Both tests put 100 other databases (MariaDB) or schemas (PostgreSQL) of three tables each
//! beside the demo database, start apijet with every statement logged, and check the bound the
//! start must hold: no slow-statement warning at `slow_request_ms = 500`, and the lookups
//! together under 500 ms. On MariaDB the class is checked without a clock too: the engine's
//! own plan (`EXPLAIN`) of every catalogue statement apijet ran must scan one database, never
//! "all databases".

use std::time::{Duration, Instant};

use crate::support::{claim, demo_database, Engine, Server};
use apijet_testkit::server::Launch;

/// Other databases (schemas) beside the served one.
const OTHERS: usize = 100;
/// What the start's lookups may take together, and the slow-statement threshold they run under.
const LOOKUP_BUDGET_MS: u64 = 500;

/// Drops the other databases when the test ends, also when it fails.
struct Others {
    engine: Engine,
    database: String,
    names: Vec<String>,
}

impl Drop for Others {
    fn drop(&mut self) {
        let sql: String = self
            .names
            .iter()
            .map(|n| match self.engine {
                Engine::Mariadb => format!("DROP DATABASE IF EXISTS {n};"),
                _ => format!("DROP SCHEMA IF EXISTS {n} CASCADE;"),
            })
            .collect();
        let _ = self.engine.cli(&self.database, &sql);
    }
}

/// Creates [`OTHERS`] databases (MariaDB) or schemas (PostgreSQL, inside `database`) named
/// `<prefix>_N`, each with three tables, one of them with a JSON column.
fn create_others(engine: Engine, database: &str, prefix: &str) -> Others {
    let names: Vec<String> = (1..=OTHERS).map(|i| format!("{prefix}_{i}")).collect();
    let others = Others {
        engine,
        database: database.to_string(),
        names: names.clone(),
    };
    let mut sql = String::new();
    for n in &names {
        claim(n);
        let (create, json) = match engine {
            Engine::Mariadb => (
                format!("DROP DATABASE IF EXISTS {n}; CREATE DATABASE {n};"),
                "json",
            ),
            _ => (
                format!("DROP SCHEMA IF EXISTS {n} CASCADE; CREATE SCHEMA {n};"),
                "jsonb",
            ),
        };
        sql.push_str(&create);
        sql.push_str(&format!(
            "CREATE TABLE {n}.a (id int PRIMARY KEY, doc {json}, name varchar(20));\
             CREATE TABLE {n}.b (id int PRIMARY KEY, n int, note text);\
             CREATE TABLE {n}.c (id int PRIMARY KEY, at timestamp, amount decimal(10,2));"
        ));
    }
    engine
        .cli(database, &sql)
        .unwrap_or_else(|e| panic!("creating {OTHERS} other databases: {e}"));
    others
}

/// One statement apijet logged (`APIJET_LOG=apijet::sql=debug`): its milliseconds and SQL.
fn logged_statements(log: &str) -> Vec<(f64, String)> {
    log.lines()
        .filter(|l| l.contains("apijet::sql"))
        .filter_map(|l| {
            let ms = l.split(" ms=").nth(1)?.split(' ').next()?.parse().ok()?;
            let sql = l.split(" sql=").nth(1)?.to_string();
            Some((ms, sql))
        })
        .collect()
}

/// Starts apijet on `url` with every statement logged and slow ones warned about past the
/// budget; waits until its schema is loaded (`/ready`); returns the server, its log and the
/// time to ready.
fn start_logged(url: &str) -> (Server, String, Duration) {
    let started = Instant::now();
    let config = format!("slow_request_ms = {LOOKUP_BUDGET_MS}\n");
    let server = Server::launch(
        Launch::serve(url, &config).env(&[("APIJET_LOG", "warn,apijet::sql=debug")]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = server.client().get("/ready").is_ok_and(|r| r.status == 200);
        if ready {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not ready within 60 s:\n{}",
            server.output_tail(4000)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    let log = std::fs::read_to_string(server.dir().join("stderr.log")).unwrap_or_default();
    (server, log, took)
}

/// The bound of the start: no slow-statement warning, the schema lookups within the budget.
fn assert_lookups_within_budget(engine: Engine, log: &str, took: Duration) {
    assert!(
        !log.contains("slow statement"),
        "{engine}: a slow statement at start beside {OTHERS} other databases:\n{log}"
    );
    let statements = logged_statements(log);
    assert!(
        !statements.is_empty(),
        "{engine}: no statement logged at start:\n{log}"
    );
    let total: f64 = statements.iter().map(|(ms, _)| ms).sum();
    eprintln!(
        "schema_lookup [{engine}]: {} statements at start took {total:.1} ms together; ready \
         after {} ms (beside {OTHERS} other databases)",
        statements.len(),
        took.as_millis()
    );
    assert!(
        total < LOOKUP_BUDGET_MS as f64,
        "{engine}: the start's statements took {total:.1} ms together beside {OTHERS} other \
         databases (budget {LOOKUP_BUDGET_MS} ms):\n{log}"
    );
}

#[test]
fn mariadb_schema_lookups_read_only_the_served_database() {
    let Some(url) = demo_database("schema_lookup_mariadb", Engine::Mariadb) else {
        return; // demo_database said why (support::skip).
    };
    let database = "apijet_it_schema_lookup_mariadb";
    let _others = create_others(Engine::Mariadb, database, "apijet_it_lookup_other");
    // Cold caches, as after a server restart: every table definition is read from disk again.
    Engine::Mariadb
        .cli(database, "FLUSH TABLES")
        .expect("FLUSH TABLES");
    let (server, log, took) = start_logged(&url);
    drop(server);

    let catalogue: Vec<String> = logged_statements(&log)
        .into_iter()
        .map(|(_, sql)| sql)
        .filter(|sql| sql.to_ascii_lowercase().contains("information_schema"))
        .collect();
    assert!(
        !catalogue.is_empty(),
        "no catalogue lookup logged at start:\n{log}"
    );
    for sql in &catalogue {
        let plan = Engine::Mariadb
            .cli(database, &format!("EXPLAIN {sql}"))
            .unwrap_or_else(|e| panic!("EXPLAIN of a start-up lookup: {e}"));
        assert!(
            !plan.contains("Scanned all databases"),
            "a start-up lookup reads every database on the server (name the database with a \
             constant):\n{sql}\n{plan}"
        );
    }
    assert_lookups_within_budget(Engine::Mariadb, &log, took);
}

#[test]
fn postgres_schema_lookups_stay_fast_beside_many_schemas() {
    let Some(url) = demo_database("schema_lookup_postgres", Engine::Postgres) else {
        return; // demo_database said why (support::skip).
    };
    let database = "apijet_it_schema_lookup_postgres";
    let _others = create_others(Engine::Postgres, database, "apijet_it_lookup_other_schema");
    let (server, log, took) = start_logged(&url);
    drop(server);
    assert_lookups_within_budget(Engine::Postgres, &log, took);
}
