//! Between the instances: what this instance's writes changed is told on the backend's change
//! feed (`apijet_exec::feed`), and what the others (and the triggers) wrote is heard and moves
//! the generations of [`Changes`](super::changes::Changes) as this instance's own writes do.
//! After the feed's connection broke, every table is taken as changed: what was told meanwhile
//! is lost. `apijet live-triggers` installs the triggers through the same capability.

use super::Pipeline;
use apijet_exec::feed::{offered, Triggers};
use apijet_exec::{Backend, DbRole, DbUrl};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Tells and hears until `stop`, when the backend has a change feed (at once otherwise).
pub async fn run(pipeline: Arc<Pipeline>, mut stop: watch::Receiver<bool>) {
    if pipeline.backend.change_feed().is_none() {
        return;
    }
    let from = instance_name();
    tokio::select! {
        () = tell(&pipeline, &from) => {}
        () = hear(&pipeline, &from) => {}
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

/// Sends what this instance wrote, coalesced: writes that commit while one notification is on
/// its way go together in the next.
async fn tell(pipeline: &Pipeline, from: &str) {
    let Some(feed) = pipeline.backend.change_feed() else {
        return;
    };
    let changes = &pipeline.changes;
    let mut seen = changes.follow();
    loop {
        changes.wait(seen).await;
        let (own, now) = changes.own_since(seen);
        seen = now;
        if own.tables.is_empty() {
            continue;
        }
        let tables: Vec<String> = own.tables.into_iter().collect();
        if let Err(e) = feed.tell(from, &tables).await {
            tracing::warn!("cannot tell the other instances what was written: {e}");
        }
    }
}

/// Listens, and moves the generations of what the others wrote; listens again after a
/// failure.
async fn hear(pipeline: &Pipeline, from: &str) {
    let Some(feed) = pipeline.backend.change_feed() else {
        return;
    };
    let mut wait = Duration::from_millis(250);
    loop {
        match feed.hear().await {
            Ok(mut hearing) => {
                wait = Duration::from_millis(250);
                // Whatever was written while no one listened is unknown.
                pipeline.changes.everything();
                while let Some(heard) = hearing.next().await {
                    if heard.from != from {
                        pipeline
                            .changes
                            .heard(heard.tables.iter().map(String::as_str));
                    }
                }
            }
            Err(e) => tracing::warn!("cannot listen for other instances' writes: {e}"),
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

/// `apijet live-triggers`: the triggers on every table of the API (not the configuration
/// tables), printed, installed or removed.
pub async fn live_triggers(db: &str, action: TriggerAction) -> Result<(), String> {
    let url = DbUrl::parse(db).map_err(|e| e.to_string())?;
    if !offered(&url) {
        return Err(
            "live-triggers is for PostgreSQL: on MariaDB and SQLite live answers look again \
             every live_poll_ms instead"
                .into(),
        );
    }
    let backend = Backend::connect(&url, 1, 0, false, DbRole::Primary { replicated: false })
        .await
        .map_err(|e| e.to_string())?;
    let feed = backend
        .change_feed()
        .ok_or("this database offers no change feed")?;
    let schema = apijet_exec::load_schema(&backend)
        .await
        .map_err(|e| e.to_string())?;
    let tables: Vec<String> = schema
        .tables()
        .filter(|t| !t.system)
        .map(|t| t.sql_name.clone())
        .collect();
    let triggers = match action {
        TriggerAction::Print | TriggerAction::Install => Triggers::Install,
        TriggerAction::Remove => Triggers::Remove,
    };
    let sql = feed.triggers(&tables, triggers);
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
