//! Checks that the script is well-formed for every engine and loads cleanly into SQLite with
//! the promised contents. (PostgreSQL and MariaDB are exercised by the integration tests.)

use apijet_core::Engine;
use rusqlite::Connection;

use super::demo_statements;
use super::sql::{quote_str, Lit};

const ENGINES: [Engine; 3] = [Engine::Sqlite, Engine::Postgres, Engine::MySql];

/// The phase of a statement: 0 DROP, 1 CREATE, 2 INSERT.
fn phase(stmt: &str) -> usize {
    if stmt.starts_with("DROP TABLE IF EXISTS ") {
        0
    } else if stmt.starts_with("CREATE TABLE ") {
        1
    } else if stmt.starts_with("INSERT INTO ") {
        2
    } else {
        panic!("unexpected statement: {stmt}")
    }
}

/// A fresh in-memory database with the demo loaded, one statement per `execute` call
/// (which refuses multi-statement strings).
fn loaded() -> Connection {
    let conn = Connection::open_in_memory().expect("open");
    for stmt in demo_statements(Engine::Sqlite) {
        conn.execute(&stmt, [])
            .unwrap_or_else(|e| panic!("{e}\n{stmt}"));
    }
    conn
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{e}\n{sql}"))
}

#[test]
fn every_engine_yields_single_statements() {
    for engine in ENGINES {
        let stmts = demo_statements(engine);
        assert!(stmts.len() > 20, "{engine:?}");
        for s in &stmts {
            assert!(!s.trim().is_empty());
            assert!(!s.trim_end().ends_with(';'), "{engine:?}: {s}");
        }
    }
}

#[test]
fn drops_then_creates_then_inserts() {
    for engine in ENGINES {
        let phases: Vec<usize> = demo_statements(engine).iter().map(|s| phase(s)).collect();
        assert!(phases.windows(2).all(|w| w[0] <= w[1]), "{engine:?}");
        assert_eq!(phases.iter().filter(|&&p| p == 0).count(), 9);
        assert_eq!(phases.iter().filter(|&&p| p == 1).count(), 9);
    }
}

#[test]
fn identical_on_every_call() {
    let once = demo_statements(Engine::MySql);
    assert_eq!(once, demo_statements(Engine::MySql));
}

#[test]
fn engines_get_their_own_quoting_and_types() {
    let pg = demo_statements(Engine::Postgres).join("\n");
    let my = demo_statements(Engine::MySql).join("\n");
    let lite = demo_statements(Engine::Sqlite).join("\n");
    assert!(pg.contains("\"praiseUserIdList\" jsonb"));
    assert!(my.contains("`praiseUserIdList` json"));
    assert!(my.contains("ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"));
    assert!(lite.contains("\"praiseUserIdList\" JSON"));
    assert!(!lite.contains('`') && !pg.contains('`'));
    assert!(pg.contains(r"E'Who else is still on the old laptop? ¯\\_(ツ)_/¯'"));
    assert!(my.contains(r"'Who else is still on the old laptop? ¯\\_(ツ)_/¯'"));
    assert!(lite.contains(r"'Who else is still on the old laptop? ¯\_(ツ)_/¯'"));
}

#[test]
fn literals_are_escaped_per_engine() {
    assert_eq!(quote_str(Engine::Sqlite, r"O'B\x"), r"'O''B\x'");
    assert_eq!(quote_str(Engine::Postgres, "O'B"), "'O''B'");
    assert_eq!(quote_str(Engine::Postgres, r"O'B\x"), r"E'O''B\\x'");
    assert_eq!(quote_str(Engine::MySql, r"O'B\x"), r"'O''B\\x'");
    assert_eq!(Lit::Cents(123_405).render(Engine::Sqlite), "1234.05");
    assert_eq!(Lit::Cents(-5).render(Engine::Sqlite), "-0.05");
}

#[test]
fn sqlite_loads_the_expected_rows() {
    let conn = loaded();
    for (table, rows) in [
        ("apijson_user", 30),
        ("apijson_privacy", 30),
        ("Moment", 100),
        ("Comment", 300),
        ("Access", 9),
        ("Request", 17),
        ("Function", 6),
        ("Verify", 0),
        ("Document", 1),
    ] {
        let sql = format!("SELECT count(*) FROM \"{table}\"");
        assert_eq!(count(&conn, &sql), rows, "{table}");
    }
    // Loading twice works: the script starts by dropping its tables.
    for stmt in demo_statements(Engine::Sqlite) {
        conn.execute(&stmt, []).expect("reload");
    }
    assert_eq!(count(&conn, "SELECT count(*) FROM Comment"), 300);
}

#[test]
fn sqlite_declares_json_columns_as_json() {
    let conn = loaded();
    let json_cols = count(
        &conn,
        "SELECT count(*) FROM sqlite_master m, pragma_table_info(m.name) c WHERE c.type = 'JSON'",
    );
    // contactIdList, User.pictureList, praiseUserIdList, Moment.pictureList, structure, demo.
    assert_eq!(json_cols, 6);
}

/// Asserts `SELECT count(*) …` answers for a list of `(expected, sql)` pairs.
fn expect_counts(conn: &Connection, cases: &[(i64, &str)]) {
    for &(expected, sql) in cases {
        assert_eq!(count(conn, sql), expected, "{sql}");
    }
}

#[test]
fn json_cells_are_valid_json() {
    let conn = loaded();
    expect_counts(
        &conn,
        &[
            (
                30,
                "SELECT count(*) FROM apijson_user \
                WHERE contactIdList IS NULL OR json_valid(contactIdList)",
            ),
            (
                30,
                "SELECT count(*) FROM apijson_user WHERE json_type(pictureList) = 'array'",
            ),
            (
                100,
                "SELECT count(*) FROM Moment WHERE json_type(praiseUserIdList) = 'array'",
            ),
            (
                100,
                "SELECT count(*) FROM Moment WHERE json_type(pictureList) = 'array'",
            ),
            (
                17,
                "SELECT count(*) FROM Request WHERE json_type(structure) = 'object'",
            ),
            (
                6,
                "SELECT count(*) FROM Function WHERE json_type(demo) = 'object'",
            ),
            (
                9,
                "SELECT count(*) FROM Access WHERE json_type(\"get\") = 'array' \
                AND json_type(head) = 'array' AND json_type(gets) = 'array' \
                AND json_type(heads) = 'array' AND json_type(post) = 'array' \
                AND json_type(put) = 'array' AND json_type(\"delete\") = 'array'",
            ),
        ],
    );
}

/// Passwords at rest: every stored password (and a new account's default pay password) is an
/// argon2id hash that checks the published demo password.
#[test]
fn demo_passwords_are_stored_as_argon2id_hashes() {
    let conn = loaded();
    let mut stmt = conn
        .prepare("SELECT _password, \"_payPassword\" FROM apijson_privacy")
        .expect("prepare");
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows.len(), 30);
    for (password, pay) in rows {
        for stored in [password, pay] {
            assert!(apijet_auth::password::is_hash(&stored), "{stored}");
            assert!(apijet_auth::password::matches(
                &stored,
                super::people::PASSWORD
            ));
            assert!(!apijet_auth::password::matches(&stored, "654321"));
        }
    }
    conn.execute(
        "INSERT INTO apijson_privacy (id, phone, _password) VALUES (1, '13900000001', 'x')",
        [],
    )
    .expect("insert without a pay password");
    let pay: String = conn
        .query_row(
            "SELECT \"_payPassword\" FROM apijson_privacy WHERE id = 1",
            [],
            |r| r.get(0),
        )
        .expect("default");
    assert!(
        apijet_auth::password::matches(&pay, super::people::PASSWORD),
        "{pay}"
    );
}

#[test]
fn demo_login_and_policy() {
    let conn = loaded();
    expect_counts(
        &conn,
        &[
            (
                1,
                "SELECT count(*) FROM apijson_privacy p JOIN apijson_user u ON u.id = p.id \
                WHERE p.phone = '13000082001' AND u.name = 'Ada'",
            ),
            (
                0,
                "SELECT count(*) FROM apijson_privacy \
                WHERE _password = '123456' OR \"_payPassword\" = '123456' \
                OR _password NOT LIKE '$argon2id$%' OR \"_payPassword\" NOT LIKE '$argon2id$%'",
            ),
            (
                30,
                "SELECT count(*) FROM apijson_privacy WHERE typeof(balance) = 'real'",
            ),
            (
                1,
                "SELECT count(*) FROM Access \
                WHERE name = 'apijson_privacy' AND alias = 'Privacy' AND \"get\" = '[]'",
            ),
            (
                1,
                "SELECT count(*) FROM Access WHERE name = 'apijson_user' AND alias = 'User'",
            ),
            (
                1,
                "SELECT count(*) FROM Request WHERE method = 'POST' AND tag = 'register'",
            ),
            (
                1,
                "SELECT count(*) FROM Request WHERE method = 'POST' AND tag = 'Comment:[]'",
            ),
            (
                1,
                "SELECT count(*) FROM Request WHERE method = 'DELETE' AND tag = 'Comment[]'",
            ),
            (
                1,
                "SELECT count(*) FROM Request WHERE method = 'GETS' AND tag = 'Privacy'",
            ),
        ],
    );
}

#[test]
fn rows_reference_each_other() {
    let conn = loaded();
    expect_counts(
        &conn,
        &[
            (
                0,
                "SELECT count(*) FROM apijson_privacy \
                WHERE id NOT IN (SELECT id FROM apijson_user)",
            ),
            (
                0,
                "SELECT count(*) FROM Moment WHERE userId NOT IN (SELECT id FROM apijson_user)",
            ),
            (
                0,
                "SELECT count(*) FROM Comment WHERE userId NOT IN (SELECT id FROM apijson_user)",
            ),
            (
                0,
                "SELECT count(*) FROM Comment WHERE momentId NOT IN (SELECT id FROM Moment)",
            ),
            // A reply points at an earlier comment on the same moment and is dated after it.
            (
                0,
                "SELECT count(*) FROM Comment c WHERE c.toId != 0 AND NOT EXISTS (\
                SELECT 1 FROM Comment p WHERE p.id = c.toId AND p.id < c.id \
                AND p.momentId = c.momentId AND p.date < c.date)",
            ),
            (
                0,
                "SELECT count(*) FROM Comment c JOIN Moment m ON m.id = c.momentId \
                WHERE c.date <= m.date",
            ),
            (
                0,
                "SELECT count(*) FROM Moment m, json_each(m.praiseUserIdList) j \
                WHERE j.value NOT IN (SELECT id FROM apijson_user)",
            ),
            (
                0,
                "SELECT count(*) FROM apijson_user u, json_each(u.contactIdList) j \
                WHERE j.value NOT IN (SELECT id FROM apijson_user) OR j.value = u.id",
            ),
        ],
    );
    let replies = count(&conn, "SELECT count(*) FROM Comment WHERE toId != 0");
    assert!((40..=120).contains(&replies), "{replies} replies");
}

#[test]
fn data_has_variety_for_queries() {
    let conn = loaded();
    expect_counts(
        &conn,
        &[
            // Fan-out differs per user.
            (9, "SELECT count(*) FROM Moment WHERE userId = 82001"),
            (0, "SELECT count(*) FROM Moment WHERE userId = 82024"),
            // NULLs, odd characters and exact round trips.
            (2, "SELECT count(*) FROM Moment WHERE content IS NULL"),
            (
                1,
                "SELECT count(*) FROM apijson_user WHERE contactIdList IS NULL",
            ),
            (
                1,
                "SELECT count(*) FROM apijson_user WHERE name = 'Olivia O''Brien'",
            ),
            (
                1,
                "SELECT count(*) > 0 FROM Moment \
                WHERE content = 'Who else is still on the old laptop? ¯\\_(ツ)_/¯'",
            ),
            // Timestamps are 'YYYY-MM-DD HH:MM:SS' text.
            (
                300,
                "SELECT count(*) FROM Comment WHERE typeof(date) = 'text' AND date GLOB \
                '20[0-9][0-9]-[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-5][0-9]'",
            ),
        ],
    );
    // Fan-out differs per moment: some are busy, some have no comments at all.
    let busiest = "SELECT max(n) FROM (SELECT count(*) n FROM Comment GROUP BY momentId)";
    assert!(count(&conn, busiest) >= 12);
    let silent = "SELECT count(*) FROM Moment WHERE id NOT IN (SELECT momentId FROM Comment)";
    assert!(count(&conn, silent) > 5);
    assert!(count(&conn, "SELECT count(*) FROM apijson_user WHERE tag IS NULL") >= 10);
}

#[test]
fn time_formatting_round_trips() {
    use super::rng::{epoch, format_utc};
    assert_eq!(format_utc(0), "1970-01-01 00:00:00");
    let leap = epoch(2024, 2, 29, 23, 59, 58);
    assert_eq!(format_utc(leap), "2024-02-29 23:59:58");
    assert_eq!(epoch(2024, 3, 1, 0, 0, 0) - leap, 2);
}
