//! `apijet demo --db URL` on a database that already holds APIJSON data: it refuses, names the
//! tables that hold rows and changes nothing, unless `--force` is given; tables that are not
//! the demo's are never touched. On SQLite, PostgreSQL and MariaDB.

use crate::support::{apijet_bin, claim, scratch_dir, skip, with_database, Engine};
use std::process::{Command, Output};

/// Runs a counting query on one database and answers the count as text.
type Count = Box<dyn Fn(&str) -> String>;

/// A database of each engine holding its own `apijson_user` and `Access` rows (the tables an
/// APIJSON database and the demo share) and a table of its own, `notes`.
fn occupied_databases() -> Vec<(&'static str, String, Count)> {
    let own = [
        "CREATE TABLE apijson_user (id bigint PRIMARY KEY, name varchar(20))",
        "INSERT INTO apijson_user VALUES (1, 'mine'), (2, 'also mine')",
        "CREATE TABLE Access (id bigint PRIMARY KEY, name varchar(20))",
        "INSERT INTO Access VALUES (1, 'apijson_user')",
        "CREATE TABLE notes (id bigint PRIMARY KEY)",
        "INSERT INTO notes VALUES (7)",
    ];
    let mut out: Vec<(&'static str, String, Count)> = Vec::new();
    // The SQLite file `demo_command.db` and the databases `apijet_it_demo_command`.
    claim("apijet_it_demo_command");

    let path = scratch_dir().join("demo_command.db");
    let _ = std::fs::remove_file(&path);
    let db = rusqlite::Connection::open(&path).expect("sqlite file");
    for s in own {
        db.execute(s, []).expect("sqlite set-up");
    }
    drop(db);
    let query_path = path.clone();
    out.push((
        "sqlite",
        format!("sqlite://{}", path.display()),
        Box::new(move |sql: &str| {
            let db = rusqlite::Connection::open(&query_path).expect("open");
            db.query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|v| v.to_string())
                .unwrap_or_else(|e| format!("error: {e}"))
        }),
    ));

    for engine in Engine::SERVERS {
        let Some(admin) = engine.url() else {
            skip(&format!(
                "demo_command: {engine} not provided ({} unset)",
                engine.url_env().unwrap_or_default()
            ));
            continue;
        };
        let database = "apijet_it_demo_command";
        let admin_db = engine.admin_database();
        client(
            engine,
            admin_db,
            &format!("DROP DATABASE IF EXISTS {database}"),
        );
        client(engine, admin_db, &format!("CREATE DATABASE {database}"));
        for s in own {
            let s = match engine {
                // Quoted as the demo quotes it: PostgreSQL would fold an unquoted Access.
                Engine::Postgres => s.replace("Access", "\"Access\""),
                _ => s.to_string(),
            };
            client(engine, database, &s);
        }
        out.push((
            engine.name(),
            with_database(&admin, database),
            Box::new(move |sql: &str| {
                let sql = match engine {
                    Engine::Postgres => sql.replace("Access", "\"Access\""),
                    _ => sql.to_string(),
                };
                client(engine, database, &sql)
            }),
        ));
    }
    out
}

/// Runs one statement with the engine's command-line client; its output, trimmed.
fn client(engine: Engine, database: &str, sql: &str) -> String {
    engine
        .cli(database, sql)
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_string()
}

fn demo(url: &str, force: bool) -> Output {
    let mut cmd = Command::new(apijet_bin());
    cmd.args(["demo", "--db", url]);
    if force {
        cmd.arg("--force");
    }
    cmd.output().expect("apijet demo runs")
}

#[test]
fn demo_refuses_a_database_whose_apijson_tables_hold_rows_unless_forced() {
    for (engine, url, count) in occupied_databases() {
        let refused = demo(&url, false);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{engine}: {stderr}");
        for named in ["apijson_user (2 rows)", "Access (1 row)", "--force"] {
            assert!(stderr.contains(named), "{engine}: no {named} in {stderr}");
        }
        assert!(!stderr.contains("notes"), "{engine}: {stderr}");
        assert_eq!(
            count("SELECT count(*) FROM apijson_user WHERE name LIKE '%mine'"),
            "2",
            "{engine}: the refused command changed nothing"
        );
        assert_eq!(count("SELECT count(*) FROM Access"), "1", "{engine}");

        let forced = demo(&url, true);
        assert!(
            forced.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&forced.stderr)
        );
        assert_eq!(count("SELECT count(*) FROM apijson_user"), "30", "{engine}");
        assert_eq!(count("SELECT count(*) FROM notes"), "1", "{engine}");
    }
}

#[test]
fn demo_loads_a_database_without_apijson_rows() {
    let dir = scratch_dir();
    let path = dir.join("demo_command_empty.db");
    let _ = std::fs::remove_file(&path);
    let db = rusqlite::Connection::open(&path).expect("sqlite file");
    // Demo tables that exist but are empty lose nothing.
    db.execute("CREATE TABLE Moment (id INTEGER PRIMARY KEY)", [])
        .expect("empty table");
    drop(db);
    let url = format!("sqlite://{}", path.display());
    let out = demo(&url, false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = rusqlite::Connection::open(&path).expect("open");
    let moments: i64 = db
        .query_row("SELECT count(*) FROM Moment", [], |r| r.get(0))
        .expect("count");
    assert_eq!(moments, 100);
}
