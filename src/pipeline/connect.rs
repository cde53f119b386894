//! Start-up: the primary and its read replicas, the demo dataset on a fresh SQLite file, the
//! first snapshot, and the plan options the configuration sets.

use super::snapshot::load_snapshot;
use super::Pipeline;
use crate::config::Config;
use crate::ledger::{Budgets, Ledger};
use crate::metrics::Metrics;
use apijet_core::Capabilities;
use apijet_exec::ids::IdGenerator;
use apijet_exec::queue::{QueueConfig, WriteQueue};
use apijet_exec::{Backend, DbRole, DbUrl};
use apijet_plan::keywords::Served;
use apijet_plan::{ExprLimits, PlanOptions};
use arc_swap::ArcSwap;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn start(cfg: &Config) -> Result<Pipeline, String> {
    let url = DbUrl::parse(&cfg.db).map_err(|e| e.to_string())?;
    // A SQLite file that does not exist yet is created and seeded with the demo dataset.
    let seed = matches!(&url, DbUrl::Sqlite(p) if !std::path::Path::new(p).exists());
    let role = DbRole::Primary {
        replicated: !cfg.read_replicas.is_empty(),
    };
    let mut backend = Backend::connect(&url, cfg.pool_size, cfg.statement_timeout_ms, seed, role)
        .await
        .map_err(|e| e.to_string())?;
    // A value the answer could never hold, the engine need not make; what a request may
    // store stays storable.
    backend.set_max_value_bytes(cfg.max_answer_bytes.max(cfg.max_body_bytes) + 1024);
    backend.set_statement_cache_bytes(cfg.statement_cache_bytes);
    let replicas = connect_replicas(cfg, &backend).await?;
    if seed {
        backend
            .execute_script(&apijet_demo::demo_statements(backend.engine()))
            .await
            .map_err(|e| format!("cannot create the demo database: {e}"))?;
        eprintln!("apijet: created {} with the demo dataset", cfg.db);
    }
    apijet_exec::stats::set_slow_statement(
        (cfg.slow_request_ms > 0).then(|| Duration::from_millis(cfg.slow_request_ms)),
    );
    let snapshot = load_snapshot(&backend, cfg.debug, cfg.max_batch).await?;
    let metrics = Arc::new(Metrics::new(
        snapshot.schema.tables().map(|t| t.api_name.as_str()),
    ));
    let backend = Arc::new(backend);
    let ids = match cfg.instance_id {
        Some(id) => IdGenerator::for_instance(id)?,
        None => IdGenerator::new(),
    };
    let reach = super::feed::reach(
        &backend,
        &snapshot.schema,
        Duration::from_millis(cfg.change_poll_ms),
    )
    .await;
    let answers = answer_cache(cfg, reach, &metrics);
    let changes = super::changes::Changes::default();
    if answers.is_some() {
        changes.follow();
    }
    Ok(Pipeline {
        answers,
        reach: tokio::sync::watch::Sender::new(reach),
        replicas,
        next_replica: AtomicUsize::new(0),
        dialect: backend.dialect(),
        queue: cfg.write_queue.then(|| {
            WriteQueue::new(
                Arc::clone(&backend),
                QueueConfig {
                    max_rows: cfg.write_queue_rows.max(1),
                    max_wait: Duration::from_micros(cfg.write_queue_us),
                },
            )
        }),
        options: plan_options(cfg, backend.capabilities()),
        backend,
        snapshot: ArcSwap::from_pointee(snapshot),
        ids,
        max_batch: cfg.max_batch,
        metrics,
        changes,
        ledger: Ledger::new(Budgets {
            anonymous_reads_per_address: cfg.anonymous_reads_per_address,
            logins_per_client: cfg.logins_per_client,
            work_per_instance: cfg.work_per_instance,
            anonymous_timeout: Duration::from_millis(cfg.anonymous_statement_timeout_ms),
        }),
    })
}

/// The limits and switches of planning, as the configuration sets them for `engine`.
fn plan_options(cfg: &Config, engine: Capabilities) -> PlanOptions {
    PlanOptions {
        debug: cfg.debug,
        max_count: cfg.max_count,
        max_page: cfg.max_page,
        max_depth: cfg.max_depth,
        max_objects: cfg.max_objects,
        expr: ExprLimits {
            max_length: cfg.max_expr_length,
            max_depth: cfg.max_expr_depth,
            max_pattern_length: cfg.max_pattern_length,
            max_list_items: cfg.max_list_items,
            max_pattern_bytes: cfg.max_pattern_bytes,
            max_value_bytes: cfg.max_answer_bytes,
            stored_value_bytes: cfg.max_body_bytes,
            engine,
        },
        max_rows: cfg.max_rows,
        max_answer_bytes: cfg.max_answer_bytes,
        raw_sql: Arc::new(apijet_plan::raw::RawSql::new(cfg.raw_sql.clone())),
        procedures: Arc::new(cfg.procedures.clone()),
        served: served_names(engine, &cfg.db),
        plan_cache: apijet_plan::read::CacheBudget {
            bytes: cfg.plan_cache_bytes,
            key_bytes: cfg.plan_cache_key_bytes,
        },
        ..PlanOptions::default()
    }
}

/// Connects to the read replicas. One that is down at start-up is an error, as the primary is:
/// a typo in a URL should not pass for an outage.
async fn connect_replicas(cfg: &Config, primary: &Backend) -> Result<Vec<Arc<Backend>>, String> {
    let mut replicas = Vec::new();
    for u in &cfg.read_replicas {
        let url = DbUrl::parse(u).map_err(|e| e.to_string())?;
        if url.engine() != primary.engine() || url.capabilities().in_process {
            return Err(format!(
                "read replica '{u}': replicas must be PostgreSQL or MySQL servers of the same engine as db"
            ));
        }
        let mut replica = Backend::connect(
            &url,
            cfg.pool_size,
            cfg.statement_timeout_ms,
            false,
            DbRole::Replica,
        )
        .await
        // The error names the replica's host, database and user (not its password).
        .map_err(|e| format!("read replica (setting read_replicas): {e}"))?;
        replica.set_statement_cache_bytes(cfg.statement_cache_bytes);
        replicas.push(Arc::new(replica));
    }
    Ok(replicas)
}

/// The names `@database` and `@schema` may give: the engine as the reference names it, and the
/// database (MariaDB) or schema (PostgreSQL) the URL connects to.
fn served_names(engine: Capabilities, url: &str) -> Served {
    let db = url
        .split('?')
        .next()
        .and_then(|u| u.split_once("://").map(|(_, rest)| rest))
        .and_then(|rest| rest.split_once('/').map(|(_, db)| db.to_string()))
        .filter(|db| !db.is_empty() && !db.contains('/'));
    let mut schemas: Vec<String> = engine
        .default_schemas
        .iter()
        .map(|s| s.to_string())
        .collect();
    // An embedded file's URL names a path, not a database.
    if !engine.in_process {
        schemas.extend(db);
    }
    Served {
        databases: engine
            .database_names
            .iter()
            .map(|d| d.to_string())
            .collect(),
        schemas,
    }
}

/// The answers kept in memory (none when `answer_cache_bytes` is 0), for as long as what
/// `reach` says is heard allows (`AnswerCache::heard_by`).
fn answer_cache(
    cfg: &Config,
    reach: super::feed::Reach,
    metrics: &Metrics,
) -> Option<Arc<super::cache::AnswerCache<super::changes::Stamp>>> {
    let answers = super::cache::AnswerCache::new(
        cfg.answer_cache_bytes,
        cfg.answer_cache == crate::config::AnswerCacheSetting::On,
        cfg.answer_cache_ttl_ms,
        // A reader waits for another's read of its key no longer than that read may run.
        match cfg.statement_timeout_ms {
            0 => Duration::from_secs(30),
            ms => Duration::from_millis(ms),
        },
        Arc::clone(&metrics.answer_cache),
    )?;
    answers.heard_by(reach.programs, reach.instances);
    Some(Arc::new(answers))
}
