//! The change feed, a capability of the backend: instances tell each other which tables they
//! wrote ([`ChangeFeed::tell`]) and hear it ([`ChangeFeed::hear`]); triggers
//! ([`ChangeFeed::triggers`]) tell of writes made by any other program. [`Backend::change_feed`]
//! is `None` on an engine that has none, whose followers look again instead.
//!
//! PostgreSQL has one: `NOTIFY` on one channel, heard with `LISTEN` on a connection of its own,
//! and statement triggers that notify the same channel. A payload is
//! `{"from": "<instance>", "tables": ["Moment", …]}`. An engine without notifications could
//! offer the same capability as a change table its triggers fill and its followers poll: a
//! variant of [`ChangeFeed`] beside [`ChangeFeed::Notify`].

use crate::backend::{Backend, DbUrl};
use crate::sink::CollectSink;
use crate::ExecError;
use apijet_core::Value;
use apijet_sql::Statement;
use serde_json::json;

/// The channel every instance and trigger notifies.
pub const CHANNEL: &str = "apijet_live";

/// Bytes of table names in one payload (PostgreSQL takes up to 8000).
const PAYLOAD_BYTES: usize = 6000;

/// How a backend tells and hears of writes.
pub enum ChangeFeed<'b> {
    /// PostgreSQL's `NOTIFY` and `LISTEN`.
    Notify(&'b Backend),
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

/// Whether a database of `url` offers a change feed, told before connecting to it.
pub fn offered(url: &DbUrl) -> bool {
    url.capabilities().change_feed
}

impl Backend {
    /// The backend's change feed, if its engine has one.
    pub fn change_feed(&self) -> Option<ChangeFeed<'_>> {
        match self {
            Backend::Postgres(_) => Some(ChangeFeed::Notify(self)),
            Backend::Sqlite(_) | Backend::MySql(_) => None,
        }
    }
}

impl ChangeFeed<'_> {
    /// Tells every instance that `from` wrote `tables`, in as many notifications as their
    /// names need.
    pub async fn tell(&self, from: &str, tables: &[String]) -> Result<(), ExecError> {
        let ChangeFeed::Notify(backend) = self;
        for payload in payloads(from, tables) {
            let stmt = Statement {
                sql: "SELECT pg_notify($1, $2)".into(),
                binds: vec![Value::Text(CHANNEL.into()), Value::Text(payload)],
            };
            backend.fetch(&stmt, &mut CollectSink::new(&[])).await?;
        }
        Ok(())
    }

    /// Starts listening, on a connection of its own.
    pub async fn hear(&self) -> Result<Hearing, ExecError> {
        let ChangeFeed::Notify(backend) = self;
        let Backend::Postgres(pg) = backend else {
            return Err(ExecError::Invalid("only PostgreSQL listens".into()));
        };
        Ok(Hearing {
            listener: pg.listen(CHANNEL).await?,
        })
    }

    /// The statements that make every write to `tables` (SQL names) tell the feed, or undo
    /// that.
    pub fn triggers(&self, tables: &[String], action: Triggers) -> Vec<String> {
        let ChangeFeed::Notify(backend) = self;
        let dialect = backend.dialect();
        let quoted = |name: &str| {
            let mut out = String::new();
            dialect.quote(name, &mut out);
            out
        };
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
    use super::{heard, payloads, Heard};

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
