//! Between the instances: what other instances and programs wrote is heard on the backend's
//! change feed (`apijet_exec::feed`) and moves the generations of
//! [`Changes`](super::changes::Changes) as this instance's own writes do.
//!
//! - PostgreSQL: this instance tells its writes (`NOTIFY`) and listens; the triggers notify
//!   of other programs' writes. Once listening again after its connection broke, every table
//!   is taken as changed: what was told meanwhile is lost.
//! - MariaDB and SQLite: the triggers fill the change table, which this instance looks at
//!   every `change_poll_ms` (one statement, admitted by the ledger as the server's own work,
//!   with a timeout of its own). While a look fails or is later than `change_poll_ms`, and
//!   while PostgreSQL's listening connection is down, the generations are deaf
//!   ([`Changes::deaf`](super::changes::Changes::deaf)): no kept answer is given.
//!
//! Which of these this instance hears is found at start ([`Reach`]): without the triggers,
//! the answers kept in memory expire after `answer_cache_ttl_ms` instead.
//! `apijet live-triggers` installs the triggers through the same capability.

use super::Pipeline;
use apijet_exec::feed::{Looked, Seen, Triggers, CHANGE_TABLE};
use apijet_exec::{Backend, DbRole, DbUrl};
use apijet_plan::schema::SchemaCache;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What this instance hears of writes made elsewhere, found at start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reach {
    /// Writes through other instances (PostgreSQL's `NOTIFY`; on MariaDB and SQLite, the
    /// triggers on every served table).
    pub instances: bool,
    /// Writes by other programs: the triggers are on every served table.
    pub programs: bool,
    /// How often the change table is looked at (`change_poll_ms`); none where nothing is
    /// looked at (PostgreSQL listens; no trigger installed).
    pub poll: Option<Duration>,
    /// `change_poll_ms`, for the next time the triggers are looked for (a reload).
    pub every: Duration,
}

/// What this instance will hear, looking every `every` where it looks: asks the database
/// which served tables have the feed's triggers (at start and on each reload), and says what
/// is missing.
pub async fn reach(backend: &Backend, schema: &SchemaCache, every: Duration) -> Reach {
    let feed = backend.change_feed();
    let tables = served_tables(schema);
    let missing = match feed.missing(&tables).await {
        Ok(missing) => missing,
        Err(e) => {
            tracing::warn!("cannot tell whether the change feed's triggers are installed: {e}");
            tables.clone()
        }
    };
    let programs = missing.is_empty();
    if !programs {
        let some: Vec<&str> = missing.iter().take(5).map(String::as_str).collect();
        tracing::info!(
            "the change feed's triggers are not on {} of {} tables ({}{}): writes to them by \
             other programs{} are not heard (`apijet live-triggers --install` installs them)",
            missing.len(),
            tables.len(),
            some.join(", "),
            if missing.len() > some.len() {
                ", …"
            } else {
                ""
            },
            if feed.instances_tell() {
                ""
            } else {
                " and other instances"
            },
        );
    }
    let every = every.max(Duration::from_millis(1));
    Reach {
        instances: feed.instances_tell() || programs,
        programs,
        poll: (!feed.listens() && missing.len() < tables.len()).then_some(every),
        every,
    }
}

/// The SQL names of the tables the API serves (not its configuration tables), each once.
fn served_tables(schema: &SchemaCache) -> Vec<String> {
    let mut tables: Vec<String> = schema
        .tables()
        .filter(|t| !t.system && t.sql_name != CHANGE_TABLE)
        .map(|t| t.sql_name.clone())
        .collect();
    tables.sort();
    tables.dedup();
    tables
}

/// Tells and hears until `stop`, as the backend's change feed does (at once when nothing is
/// heard).
pub async fn run(pipeline: Arc<Pipeline>, mut stop: watch::Receiver<bool>) {
    let feed = pipeline.backend.change_feed();
    if feed.listens() {
        let from = instance_name();
        tokio::select! {
            () = tell(&pipeline, &from) => {}
            () = hear(&pipeline, &from) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
    } else {
        // Looks while the triggers are there, as found at start and on each reload.
        let mut reached = pipeline.reach.subscribe();
        // Kept across reloads: only a first look takes everything as changed.
        let mut seen = Seen::default();
        loop {
            let poll = reached.borrow_and_update().poll;
            let looking = async {
                match poll {
                    Some(every) => look(&pipeline, every, &mut seen).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = looking => return,
                changed = reached.changed() => if changed.is_err() { return },
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}

/// The server's own work, for the ledger.
const SERVER: crate::ledger::Client = crate::ledger::Client {
    key: None,
    logged_in: true,
};

/// Looks at the change table every `every`, and moves the generations of what moved.
async fn look(pipeline: &Pipeline, every: Duration, seen: &mut Seen) {
    let feed = pipeline.backend.change_feed();
    let mut failing = false;
    // A look slower than this is stopped: it would hold a connection while the next is due.
    let timeout = (every * 4).max(Duration::from_secs(1));
    loop {
        let looked = match pipeline.ledger.admit(SERVER, crate::ledger::Kind::Server) {
            Ok(_admitted) => {
                let watch =
                    apijet_exec::cancel::Watch::default().with_timeout(timeout, "change_poll_ms");
                let look = apijet_exec::cancel::watched(watch, feed.look(seen));
                tokio::pin!(look);
                // While a look is slower than the poll, what was written meanwhile is unknown:
                // no kept answer is given past one poll unheard.
                match tokio::time::timeout(every, &mut look).await {
                    Ok(looked) => looked,
                    Err(_) => {
                        pipeline.changes.deaf(true);
                        look.await
                    }
                }
                .map_err(|e| e.to_string())
            }
            Err(refused) => Err(refused.message),
        };
        match looked {
            Ok(looked) => {
                failing = false;
                match looked {
                    Looked::Tables(tables) => {
                        pipeline.changes.heard(tables.iter().map(String::as_str))
                    }
                    Looked::Everything => pipeline.changes.everything(),
                }
                pipeline.changes.deaf(false);
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(
                        "cannot look at {CHANGE_TABLE} for other writers' writes: {e}; no kept \
                         answer is given until it can"
                    );
                }
                failing = true;
                // What is written meanwhile is told by the first look that succeeds (the
                // generations stay in the table).
                pipeline.changes.deaf(true);
            }
        }
        tokio::time::sleep(every).await;
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
    let feed = pipeline.backend.change_feed();
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
    let feed = pipeline.backend.change_feed();
    let mut wait = Duration::from_millis(250);
    loop {
        match feed.hear().await {
            Ok(mut hearing) => {
                wait = Duration::from_millis(250);
                // Whatever was written while no one listened is unknown.
                pipeline.changes.everything();
                pipeline.changes.deaf(false);
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
        pipeline.changes.deaf(true);
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
    /// Drop the triggers and what they fill or call.
    Remove,
}

/// `apijet live-triggers`: the triggers on every table of the API (not the configuration
/// tables), printed, installed or removed; on MariaDB and SQLite with the change table they
/// fill.
pub async fn live_triggers(db: &str, action: TriggerAction) -> Result<(), String> {
    let url = DbUrl::parse(db).map_err(|e| e.to_string())?;
    let backend = Backend::connect(&url, 1, 0, false, DbRole::Primary { replicated: false })
        .await
        .map_err(|e| e.to_string())?;
    let feed = backend.change_feed();
    let schema = apijet_exec::load_schema(&backend)
        .await
        .map_err(|e| e.to_string())?;
    let tables = served_tables(&schema);
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
