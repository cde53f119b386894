//! PostgreSQL: instances tell each other which tables they wrote, with `NOTIFY` on one
//! channel, and hear it with `LISTEN` on a connection of their own. Optional triggers
//! (`apijet live-triggers`) notify the same channel for writes by any other program.
//!
//! A payload is `{"from": "<instance>", "tables": ["Moment", …]}`; an instance ignores its own
//! (it marked them already). After the listening connection broke, every table is marked:
//! notifications sent meanwhile are lost.

use super::Live;
use apijet_core::Value;
use apijet_exec::sink::CollectSink;
use apijet_exec::{Backend, DbRole, DbUrl};
use apijet_sql::Statement;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The channel every instance and trigger notifies.
pub const CHANNEL: &str = "apijet_live";

/// Bytes of table names in one payload (PostgreSQL takes up to 8000).
const PAYLOAD_BYTES: usize = 6000;

/// Tells and hears, until shutdown.
pub async fn run(live: Arc<Live>) {
    let from = instance_name();
    let mut stop = live.stop.subscribe();
    tokio::select! {
        () = tell(&live, &from) => {}
        () = hear(&live, &from) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// A name for this process, different from every other instance's.
fn instance_name() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        b = (std::process::id() as u64).to_le_bytes();
    }
    format!("{:016x}", u64::from_le_bytes(b))
}

/// The payloads that tell of `tables`, each within PostgreSQL's size.
fn payloads(from: &str, tables: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut chunk: Vec<String> = Vec::new();
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

/// Sends what this instance wrote, coalesced: writes that commit while one notification is on
/// its way go together in the next.
async fn tell(live: &Live, from: &str) {
    loop {
        live.tell.notified().await;
        let tables = live.take_outgoing();
        for payload in payloads(from, tables) {
            let stmt = Statement {
                sql: "SELECT pg_notify($1, $2)".into(),
                binds: vec![Value::Text(CHANNEL.into()), Value::Text(payload)],
            };
            let mut sink = CollectSink::new(&[]);
            if let Err(e) = live.pipeline.backend.fetch(&stmt, &mut sink).await {
                tracing::warn!("cannot tell the other instances what was written: {e}");
            }
        }
    }
}

/// Listens, and marks what the others (and the triggers) wrote; reconnects after a failure.
async fn hear(live: &Live, from: &str) {
    let Backend::Postgres(pg) = &*live.pipeline.backend else {
        return std::future::pending().await;
    };
    let mut wait = Duration::from_millis(250);
    loop {
        match pg.listen(CHANNEL).await {
            Ok(mut listener) => {
                wait = Duration::from_millis(250);
                // Whatever was written while no one listened is unknown.
                live.mark_all();
                while let Some(payload) = listener.payloads.recv().await {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&payload) else {
                        continue;
                    };
                    if v["from"].as_str() == Some(from) {
                        continue;
                    }
                    if let Some(tables) = v["tables"].as_array() {
                        live.mark(tables.iter().filter_map(serde_json::Value::as_str));
                    }
                }
            }
            Err(e) => tracing::warn!("cannot LISTEN for other instances' writes: {e}"),
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(10));
    }
}

/// What `apijet live-triggers` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerAction {
    /// Print the SQL.
    Print,
    /// Run it.
    Install,
    /// Drop the triggers and their function.
    Remove,
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The statements that make every write to `tables` notify [`CHANNEL`] (or undo that).
pub fn trigger_sql(tables: &[String], action: TriggerAction) -> Vec<String> {
    let mut out = Vec::new();
    if action != TriggerAction::Remove {
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
        if action != TriggerAction::Remove {
            out.push(format!(
                "CREATE TRIGGER apijet_live AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {} \
                 FOR EACH STATEMENT EXECUTE FUNCTION apijet_live_notify()",
                quoted(t)
            ));
        }
    }
    if action == TriggerAction::Remove {
        out.push("DROP FUNCTION IF EXISTS apijet_live_notify()".into());
    }
    out
}

/// `apijet live-triggers`: the triggers on every table of the API (not the configuration
/// tables), printed, installed or removed.
pub async fn live_triggers(db: &str, action: TriggerAction) -> Result<(), String> {
    let url = DbUrl::parse(db).map_err(|e| e.to_string())?;
    if !url.capabilities().change_feed {
        return Err(
            "live-triggers is for PostgreSQL: on MariaDB and SQLite live answers look again \
             every live_poll_ms instead"
                .into(),
        );
    }
    let backend = Backend::connect(&url, 1, 0, false, DbRole::Primary { replicated: false })
        .await
        .map_err(|e| e.to_string())?;
    let schema = apijet_exec::load_schema(&backend)
        .await
        .map_err(|e| e.to_string())?;
    let tables: Vec<String> = schema
        .tables()
        .filter(|t| !t.system)
        .map(|t| t.sql_name.clone())
        .collect();
    let sql = trigger_sql(&tables, action);
    match action {
        TriggerAction::Print => {
            for s in &sql {
                println!("{s};\n");
            }
        }
        TriggerAction::Install | TriggerAction::Remove => {
            backend
                .execute_script(&sql)
                .await
                .map_err(|e| e.to_string())?;
            let done = if action == TriggerAction::Install {
                "installed on"
            } else {
                "removed from"
            };
            println!("apijet live triggers {done} {} tables", tables.len());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::payloads;

    #[test]
    fn payloads_stay_within_postgresql_limit() {
        let tables: Vec<String> = (0..2000).map(|i| format!("table_number_{i}")).collect();
        let all = payloads("me", tables.clone());
        assert!(all.len() > 1);
        let mut heard = Vec::new();
        for p in &all {
            assert!(p.len() < 8000, "{}", p.len());
            let v: serde_json::Value = serde_json::from_str(p).expect("json");
            assert_eq!(v["from"], "me");
            heard.extend(
                v["tables"]
                    .as_array()
                    .expect("tables")
                    .iter()
                    .map(|t| t.as_str().expect("text").to_string()),
            );
        }
        assert_eq!(heard, tables);
    }
}
