//! The change feed, a capability of the backend: how an instance learns which tables other
//! instances and other programs wrote. Every engine has one ([`Backend::change_feed`]):
//!
//! - PostgreSQL: [`ChangeFeed::Notify`]. Instances tell each other which tables they wrote
//!   ([`ChangeFeed::tell`], `NOTIFY` on one channel) and hear it ([`ChangeFeed::hear`],
//!   `LISTEN` on a connection of its own); statement triggers ([`ChangeFeed::triggers`])
//!   notify the same channel of writes made by any other program. A payload is
//!   `{"from": "<instance>", "tables": ["Moment", …]}`.
//! - MariaDB and SQLite, which have no notifications: [`ChangeFeed::Table`]. Row triggers on
//!   every served table move that table's generation in [`CHANGE_TABLE`] (writes of every
//!   instance and program alike, in the writer's transaction), and every instance polls it
//!   ([`ChangeFeed::look`]: one statement reading at most [`MOST_POLLED`] rows), hearing the
//!   tables whose generation moved since its last look. Nothing is told: the triggers tell.
//!
//! Either way the triggers are installed by `apijet live-triggers --install`; an instance asks
//! at start which served tables lack them ([`ChangeFeed::missing`]).

use crate::backend::Backend;
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::{Engine, Value};
use apijet_sql::Statement;
use serde_json::json;
use std::collections::{BTreeSet, HashMap};

/// The channel every instance and trigger notifies.
pub const CHANNEL: &str = "apijet_live";

/// Bytes of table names in one payload (PostgreSQL takes up to 8000).
const PAYLOAD_BYTES: usize = 6000;

/// The change table of the engines without notifications: a generation per table, moved by
/// the triggers.
pub const CHANGE_TABLE: &str = "apijet_changes";

/// Most rows one look at the change table reads: one per served table, so far more than any
/// schema has. A table past it is not heard, so a look that reads this many says everything
/// moved.
pub const MOST_POLLED: usize = 4096;

/// How a backend tells and hears of writes.
pub enum ChangeFeed<'b> {
    /// PostgreSQL's `NOTIFY` and `LISTEN`.
    Notify(&'b Backend),
    /// A change table filled by triggers and polled (MariaDB, SQLite).
    Table(&'b Backend),
}

/// The generations of the change table an instance saw at its last look; none before its
/// first.
#[derive(Debug, Default)]
pub struct Seen(Option<HashMap<String, i64>>);

/// What a look at the change table found moved since the one before.
#[derive(Debug, PartialEq, Eq)]
pub enum Looked {
    /// The tables whose generation moved (or appeared, or went away).
    Tables(Vec<String>),
    /// Everything is to be taken as moved: the first look (what was written before it is
    /// unknown), or more rows than a look reads.
    Everything,
}

/// What the triggers should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Triggers {
    /// Every write to a table tells the feed.
    Install,
    /// Drop the triggers and their function.
    Remove,
}

/// One notification heard: who wrote (an instance's name, or `trigger`) and which tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The instance that told it, as it named itself in [`ChangeFeed::tell`].
    pub from: String,
    /// The SQL names of the tables it wrote.
    pub tables: Vec<String>,
}

/// A feed being listened to; dropping it stops listening.
pub struct Hearing {
    listener: crate::backend::Listener,
}

impl Hearing {
    /// The next notification; `None` once the connection broke (whatever was told meanwhile
    /// is lost). Payloads that are not the feed's are skipped.
    pub async fn next(&mut self) -> Option<Heard> {
        loop {
            let payload = self.listener.payloads.recv().await?;
            if let Some(heard) = heard(&payload) {
                return Some(heard);
            }
        }
    }
}

impl Backend {
    /// The backend's change feed.
    pub fn change_feed(&self) -> ChangeFeed<'_> {
        match self {
            Backend::Postgres(_) => ChangeFeed::Notify(self),
            Backend::Sqlite(_) | Backend::MySql(_) => ChangeFeed::Table(self),
        }
    }
}

impl ChangeFeed<'_> {
    /// Whether instances tell each other of their own writes ([`ChangeFeed::tell`]), heard
    /// with or without the triggers; else the triggers tell of every writer's, and nothing is
    /// heard without them.
    pub fn instances_tell(&self) -> bool {
        matches!(self, ChangeFeed::Notify(_))
    }

    /// Whether what is written is heard by listening ([`ChangeFeed::hear`]); else by looking
    /// at the change table ([`ChangeFeed::look`]).
    pub fn listens(&self) -> bool {
        matches!(self, ChangeFeed::Notify(_))
    }

    /// Tells every instance that `from` wrote `tables`, in as many notifications as their
    /// names need (nothing to tell where the triggers fill a change table).
    pub async fn tell(&self, from: &str, tables: &[String]) -> Result<(), ExecError> {
        let ChangeFeed::Notify(backend) = self else {
            return Ok(());
        };
        for payload in payloads(from, tables) {
            let stmt = Statement {
                sql: "SELECT pg_notify($1, $2)".into(),
                binds: vec![Value::Text(CHANNEL.into()), Value::Text(payload)],
                bounded: false,
            };
            backend.fetch(&stmt, &mut CollectSink::new(&[])).await?;
        }
        Ok(())
    }

    /// Starts listening, on a connection of its own.
    pub async fn hear(&self) -> Result<Hearing, ExecError> {
        let ChangeFeed::Notify(Backend::Postgres(pg)) = self else {
            return Err(ExecError::Invalid(
                "only PostgreSQL listens: the change table is looked at".into(),
            ));
        };
        Ok(Hearing {
            listener: pg.listen(CHANNEL).await?,
        })
    }

    /// The statements that make every write to `tables` (SQL names) tell the feed, or undo
    /// that.
    pub fn triggers(&self, tables: &[String], action: Triggers) -> Vec<String> {
        let backend = match self {
            ChangeFeed::Notify(backend) => backend,
            ChangeFeed::Table(backend) => return table_triggers(backend, tables, action),
        };
        let dialect = backend.dialect();
        let quoted = |name: &str| dialect.quoted(name);
        let mut out = Vec::new();
        if action == Triggers::Install {
            out.push(format!(
                "CREATE OR REPLACE FUNCTION apijet_live_notify() RETURNS trigger LANGUAGE plpgsql AS $$\n\
                 BEGIN\n  PERFORM pg_notify('{CHANNEL}', json_build_object('from', 'trigger', 'tables', \
                 json_build_array(TG_TABLE_NAME))::text);\n  RETURN NULL;\nEND $$"
            ));
        }
        for t in tables {
            out.push(format!(
                "DROP TRIGGER IF EXISTS apijet_live ON {}",
                quoted(t)
            ));
            if action == Triggers::Install {
                out.push(format!(
                    "CREATE TRIGGER apijet_live AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {} \
                     FOR EACH STATEMENT EXECUTE FUNCTION apijet_live_notify()",
                    quoted(t)
                ));
            }
        }
        if action == Triggers::Remove {
            out.push("DROP FUNCTION IF EXISTS apijet_live_notify()".into());
        }
        out
    }

    /// The tables of `tables` (SQL names) on which the triggers are not installed, so that
    /// other programs' writes to them are not heard (on MariaDB and SQLite, nor other
    /// instances').
    pub async fn missing(&self, tables: &[String]) -> Result<Vec<String>, ExecError> {
        let (backend, sql) = match self {
            ChangeFeed::Notify(backend) => (
                backend,
                "SELECT c.relname AS name FROM pg_trigger AS t \
                 JOIN pg_class AS c ON c.oid = t.tgrelid \
                 JOIN pg_namespace AS n ON n.oid = c.relnamespace \
                 WHERE t.tgname = 'apijet_live' AND n.nspname = current_schema()",
            ),
            ChangeFeed::Table(backend) => (
                backend,
                match backend.engine() {
                    Engine::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'trigger'",
                    // MariaDB builds the rows of the database its lookup key names
                    // (EVENT_OBJECT_SCHEMA, the triggers' tables' database); by
                    // TRIGGER_SCHEMA it reads every database on the server.
                    _ => {
                        "SELECT TRIGGER_NAME AS name FROM information_schema.TRIGGERS \
                         WHERE EVENT_OBJECT_SCHEMA = DATABASE()"
                    }
                },
            ),
        };
        let mut sink = CollectSink::new(&[]);
        let stmt = Statement {
            sql: sql.into(),
            binds: Vec::new(),
            bounded: false,
        };
        backend.fetch(&stmt, &mut sink).await?;
        let found: BTreeSet<&str> = sink
            .rows
            .iter()
            .filter_map(|r| r.get("name").and_then(serde_json::Value::as_str))
            .collect();
        let has = |t: &String| match self {
            ChangeFeed::Notify(_) => found.contains(t.as_str()),
            ChangeFeed::Table(_) => OPS
                .iter()
                .all(|op| found.contains(trigger_name(op.0, t).as_str())),
        };
        Ok(tables.iter().filter(|t| !has(t)).cloned().collect())
    }

    /// Looks at the change table: which tables' generations moved since `seen`, which it
    /// then holds. One statement of at most [`MOST_POLLED`] rows.
    pub async fn look(&self, seen: &mut Seen) -> Result<Looked, ExecError> {
        let ChangeFeed::Table(backend) = self else {
            return Err(ExecError::Invalid(
                "PostgreSQL's feed is listened to, not looked at".into(),
            ));
        };
        let stmt = Statement {
            sql: format!(
                "SELECT table_name AS t, generation AS g FROM {CHANGE_TABLE} LIMIT {MOST_POLLED}"
            ),
            binds: Vec::new(),
            bounded: false,
        };
        let mut sink = CollectSink::new(&[]);
        backend.fetch(&stmt, &mut sink).await?;
        let now: HashMap<String, i64> = sink
            .rows
            .iter()
            .filter_map(|r| {
                let t = r.get("t")?.as_str()?;
                let g = r.get("g")?.as_i64()?;
                Some((t.to_string(), g))
            })
            .collect();
        let full = sink.rows.len() >= MOST_POLLED;
        let before = seen.0.replace(now);
        let (Some(before), false) = (before, full) else {
            return Ok(Looked::Everything);
        };
        let now = seen.0.as_ref().unwrap_or(&before);
        let mut moved: BTreeSet<&String> = now
            .iter()
            .filter(|(t, g)| before.get(*t) != Some(*g))
            .map(|(t, _)| t)
            .collect();
        moved.extend(before.keys().filter(|t| !now.contains_key(*t)));
        Ok(Looked::Tables(moved.into_iter().cloned().collect()))
    }
}

/// The row triggers of the change table: the statement each fires on, and its letter in the
/// trigger's name.
const OPS: [(char, &str); 3] = [('i', "INSERT"), ('u', "UPDATE"), ('d', "DELETE")];

/// The name of the trigger that moves `table`'s generation on `op`: readable where it fits
/// MariaDB's 64 characters, else ending with a hash of the table's name.
fn trigger_name(op: char, table: &str) -> String {
    let name = format!("{CHANGE_TABLE}_{op}_{table}");
    if name.len() <= 64 {
        return name;
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let hash = table.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{CHANGE_TABLE}_{op}_{hash:016x}")
}

/// The change table and the row triggers on `tables` that move their generations (or the
/// statements that drop them). Each is idempotent: the table and its rows are made when
/// missing, and each trigger is dropped before it is made.
fn table_triggers(backend: &Backend, tables: &[String], action: Triggers) -> Vec<String> {
    let engine = backend.engine();
    let dialect = backend.dialect();
    let quoted = |name: &str| dialect.quoted(name);
    let mut out = Vec::new();
    if action == Triggers::Install {
        let name_type = match engine {
            Engine::Sqlite => "TEXT",
            _ => "VARCHAR(64)",
        };
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS {CHANGE_TABLE} (table_name {name_type} NOT NULL \
             PRIMARY KEY, generation BIGINT NOT NULL DEFAULT 0)"
        ));
        let insert = match engine {
            Engine::Sqlite => "INSERT OR IGNORE",
            _ => "INSERT IGNORE",
        };
        // Every row exists before a trigger fires: a trigger only updates its own row, so
        // writers of different tables never wait for each other.
        for t in tables {
            out.push(format!(
                "{insert} INTO {CHANGE_TABLE} (table_name, generation) VALUES ({}, 0)",
                dialect.string_literal(t)
            ));
        }
    }
    for t in tables {
        for (op, event) in OPS {
            let name = quoted(&trigger_name(op, t));
            out.push(format!("DROP TRIGGER IF EXISTS {name}"));
            if action == Triggers::Install {
                let bump = format!(
                    "UPDATE {CHANGE_TABLE} SET generation = generation + 1 WHERE table_name = {}",
                    dialect.string_literal(t)
                );
                out.push(match engine {
                    Engine::Sqlite => format!(
                        "CREATE TRIGGER {name} AFTER {event} ON {} BEGIN {bump}; END",
                        quoted(t)
                    ),
                    _ => format!(
                        "CREATE TRIGGER {name} AFTER {event} ON {} FOR EACH ROW {bump}",
                        quoted(t)
                    ),
                });
            }
        }
    }
    if action == Triggers::Remove {
        out.push(format!("DROP TABLE IF EXISTS {CHANGE_TABLE}"));
    }
    out
}

/// The payloads that tell of `tables`, each within PostgreSQL's size.
fn payloads(from: &str, tables: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut chunk: Vec<&str> = Vec::new();
    let mut size = 0;
    for t in tables {
        if size + t.len() > PAYLOAD_BYTES && !chunk.is_empty() {
            out.push(json!({"from": from, "tables": std::mem::take(&mut chunk)}).to_string());
            size = 0;
        }
        size += t.len() + 4;
        chunk.push(t);
    }
    if !chunk.is_empty() {
        out.push(json!({"from": from, "tables": chunk}).to_string());
    }
    out
}

/// What a payload tells, if it is one of the feed's.
fn heard(payload: &str) -> Option<Heard> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    let from = v.get("from")?.as_str()?.to_string();
    let tables = v
        .get("tables")?
        .as_array()?
        .iter()
        .filter_map(|t| Some(t.as_str()?.to_string()))
        .collect();
    Some(Heard { from, tables })
}

#[cfg(test)]
mod tests {
    use super::{heard, payloads, trigger_name, Heard, Looked, Seen, Triggers};
    use crate::backend::{Backend, DbRole, DbUrl};

    #[test]
    fn trigger_names_fit_mariadb_and_differ_by_table_and_event() {
        let long = "t".repeat(64);
        let longer = format!("{long}u");
        for op in ['i', 'u', 'd'] {
            assert_eq!(
                trigger_name(op, "Moment"),
                format!("apijet_changes_{op}_Moment")
            );
            assert!(trigger_name(op, &long).len() <= 64);
            assert_ne!(trigger_name(op, &long), trigger_name(op, &longer));
        }
        assert_ne!(trigger_name('i', &long), trigger_name('u', &long));
    }

    /// On a real SQLite file: the first look takes everything as moved; then exactly the
    /// tables another connection wrote (any statement, any quote in the name), nothing
    /// when nothing was written, and a table whose row went away; installing twice and
    /// removing leave no trigger behind.
    #[tokio::test]
    async fn a_look_at_the_change_table_hears_exactly_the_tables_written_since_the_last() {
        let dir = std::env::temp_dir().join(format!("apijet-feed-look-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("f.db");
        let url = DbUrl::parse(&format!("sqlite://{}", path.display())).expect("url");
        let backend = Backend::connect(&url, 2, 0, true, DbRole::Primary { replicated: false })
            .await
            .expect("open");
        let tables = vec!["a".to_string(), "it's".to_string()];
        let run = |sql: Vec<String>| {
            let backend = &backend;
            async move { backend.execute_script(&sql).await.expect("runs") }
        };
        run(vec![
            "CREATE TABLE a (id INTEGER PRIMARY KEY)".into(),
            "CREATE TABLE \"it's\" (id INTEGER PRIMARY KEY)".into(),
        ])
        .await;
        let feed = backend.change_feed();
        assert_eq!(feed.missing(&tables).await.expect("asks"), tables);
        for _ in 0..2 {
            run(feed.triggers(&tables, Triggers::Install)).await;
        }
        assert!(feed.missing(&tables).await.expect("asks").is_empty());
        let mut seen = Seen::default();
        assert_eq!(
            feed.look(&mut seen).await.expect("looks"),
            Looked::Everything
        );
        assert_eq!(
            feed.look(&mut seen).await.expect("looks"),
            Looked::Tables(vec![])
        );
        let other = rusqlite::Connection::open(&path).expect("another program");
        other
            .execute_batch("INSERT INTO \"it's\" VALUES (1); UPDATE \"it's\" SET id = 2")
            .expect("writes");
        assert_eq!(
            feed.look(&mut seen).await.expect("looks"),
            Looked::Tables(vec!["it's".into()])
        );
        other
            .execute_batch("DELETE FROM \"it's\"; INSERT INTO a VALUES (1)")
            .expect("writes");
        assert_eq!(
            feed.look(&mut seen).await.expect("looks"),
            Looked::Tables(vec!["a".into(), "it's".into()])
        );
        other
            .execute_batch("DELETE FROM apijet_changes WHERE table_name = 'a'")
            .expect("writes");
        assert_eq!(
            feed.look(&mut seen).await.expect("looks"),
            Looked::Tables(vec!["a".into()])
        );
        run(feed.triggers(&tables, Triggers::Remove)).await;
        assert_eq!(feed.missing(&tables).await.expect("asks"), tables);
        assert!(
            feed.look(&mut seen).await.is_err(),
            "the change table is gone"
        );
        drop(other);
        drop(backend);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn payloads_stay_within_postgresql_limit_and_are_heard_as_told() {
        let tables: Vec<String> = (0..2000).map(|i| format!("table_number_{i}")).collect();
        let all = payloads("me", &tables);
        assert!(all.len() > 1);
        let mut told = Vec::new();
        for p in &all {
            assert!(p.len() < 8000, "{}", p.len());
            let Some(Heard { from, tables }) = heard(p) else {
                panic!("a payload of the feed: {p}")
            };
            assert_eq!(from, "me");
            told.extend(tables);
        }
        assert_eq!(told, tables);
    }

    #[test]
    fn what_is_not_a_payload_of_the_feed_is_not_heard() {
        for other in [
            "",
            "x",
            "{}",
            r#"{"from": 1, "tables": []}"#,
            r#"{"from": "a"}"#,
        ] {
            assert_eq!(heard(other), None, "{other}");
        }
    }
}
