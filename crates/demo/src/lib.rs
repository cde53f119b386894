//! apijet-demo: the demo dataset of our own: what `apijet serve` loads into a fresh
//! `sqlite://apijet.db`, and what `apijet demo` (and with it the integration tests) loads into
//! PostgreSQL and MariaDB/MySQL.
//!
//! It has the table shapes of the APIJSON demo database, so APIJSON clients and docs work
//! unchanged, but its own rows:
//!
//! | table             | API name  | rows | what                                         |
//! |-------------------|-----------|------|----------------------------------------------|
//! | `apijson_user`    | `User`    | 30   | public profiles, ids 82001–82026 and 4 more |
//! | `apijson_privacy` | `Privacy` | 30   | phone, email, balance, passwords             |
//! | `Moment`          | `Moment`  | 100  | posts, ids 1001–1100                         |
//! | `Comment`         | `Comment` | 300  | comments and replies, ids 5001–5300          |
//! | `Access`          |           | 9    | role policy per table and method             |
//! | `Request`         |           | 17   | allowed shapes of private requests           |
//! | `Function`        |           | 6    | callable remote functions                    |
//! | `Verify`          |           | 0    | verification codes of the account endpoints  |
//! | `Document`        |           | 1    | `/router/{method}/{tag}` request templates   |
//!
//! Demo logins: phone `130000` + user id (e.g. `13000082001`), password `123456` for all
//! (stored as an argon2id hash, as every password apijet sets).
//!
//! The statements are generated, not stored, so each engine gets its own quoting and types
//! from one description; a fixed-seed PRNG makes the rows identical everywhere.

pub mod guard;
mod people;
mod rng;
mod schema;
mod social;
mod sql;
mod system;
#[cfg(test)]
mod tests;

use apijet_core::Engine;
use apijet_exec::{Backend, DbRole, DbUrl};

use self::rng::Rng;
use self::schema::{
    Table, ACCESS, COMMENT, DOCUMENT, FUNCTION, MOMENT, PRIVACY, REQUEST, TABLES, USER, VERIFY,
};

/// The PRNG seed. Changing it changes every generated row (and the tests' expectations).
const SEED: u64 = 0x00A9_1E70_DE30_2024;

/// The statements that (re)create the demo tables and rows on `engine`, in order:
/// first DROP TABLE IF EXISTS for every demo table, then CREATE TABLE, then INSERTs.
///
/// Each element is a single statement without a trailing semicolon, because the PostgreSQL
/// and MySQL drivers run one statement per call. Values are inlined literals: this is our own
/// constant data, never client input.
pub fn demo_statements(engine: Engine) -> Vec<String> {
    let data = dataset();
    let mut out: Vec<String> = TABLES.iter().rev().map(|t| t.drop(engine)).collect();
    out.extend(TABLES.iter().map(|t| t.create(engine)));
    for (table, rows) in &data {
        out.extend(sql::inserts(engine, table.name, &table.col_names(), rows));
    }
    out
}

/// `apijet demo --db URL`: (re)creates the demo dataset. Without `force` it refuses, changing
/// nothing, when a table it would drop holds rows ([`guard`]).
pub async fn load(db: &str, force: bool) -> Result<(), String> {
    let url = DbUrl::parse(db).map_err(|e| e.to_string())?;
    let backend = Backend::connect(&url, 1, 0, true, DbRole::Primary { replicated: false })
        .await
        .map_err(|e| e.to_string())?;
    if !force {
        let occupied = guard::occupied_tables(&backend).await?;
        if !occupied.is_empty() {
            return Err(guard::refusal(&occupied));
        }
    }
    backend
        .execute_script(&demo_statements(backend.engine()))
        .await
        .map_err(|e| e.to_string())
}

/// Every table with its rows. Generation order is fixed (the PRNG is shared), so the rows do
/// not depend on the engine.
fn dataset() -> Vec<(Table, Vec<Vec<sql::Lit>>)> {
    let mut rng = Rng::new(SEED);
    let users = people::user_rows(&mut rng);
    let privacy = people::privacy_rows(&mut rng);
    let moments = social::moments(&mut rng);
    let comments = social::comment_rows(&mut rng, &moments);
    vec![
        (USER, users),
        (PRIVACY, privacy),
        (MOMENT, moments.into_iter().map(|m| m.row).collect()),
        (COMMENT, comments),
        (ACCESS, system::access_rows()),
        (REQUEST, system::request_rows()),
        (FUNCTION, system::function_rows()),
        (VERIFY, Vec::new()),
        (DOCUMENT, system::document_rows()),
    ]
}
