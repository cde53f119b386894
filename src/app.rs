//! The pipeline for one request, stage after stage: request → plan/exec → response.

use crate::config::Config;
use apijet_core::Method;
use apijet_exec::read::{read, ReadEnv};
use apijet_exec::{list_query, Backend, DbUrl};
use apijet_plan::schema::SchemaCache;
use apijet_plan::{PlanError, PlanOptions};
use apijet_request::{is_table_key, parse_body, Request};
use apijet_response::stream::{Chunk, StreamSink};
use apijet_response::{failure, now_ms, success, ApiError};
use apijet_sql::Dialect;
use serde_json::{Map, Value as Json};
use std::sync::Arc;
use tokio::sync::mpsc;

/// An answer: a JSON document, or a list streaming from the database.
pub enum Answer {
    /// The whole answer.
    Json(Json),
    /// Chunks of a streamed list; the first one decides between data and an error envelope.
    Stream(mpsc::Receiver<Chunk>),
}

/// Chunks in flight per streamed answer: with ~32 KiB chunks this bounds a stream's buffer.
const STREAM_CHANNEL: usize = 2;

/// What every request shares; built once at start-up.
pub struct AppState {
    pub backend: Backend,
    pub dialect: Box<dyn Dialect>,
    pub schema: Arc<SchemaCache>,
    pub options: PlanOptions,
}

impl AppState {
    /// Connects, seeds the default SQLite database on first start, and loads the schema.
    pub async fn start(cfg: &Config) -> Result<AppState, String> {
        let url = DbUrl::parse(&cfg.db).map_err(|e| e.to_string())?;
        let seed = matches!(&url, DbUrl::Sqlite(p) if cfg.db == crate::config::DEFAULT_DB
            && !std::path::Path::new(p).exists());
        let backend = Backend::connect(&url, cfg.pool_size, cfg.statement_timeout_ms, seed)
            .await
            .map_err(|e| e.to_string())?;
        if seed {
            backend
                .execute_script(&crate::demo::demo_statements(backend.engine()))
                .await
                .map_err(|e| format!("cannot create the demo database: {e}"))?;
            eprintln!("apijet: created {} with the demo dataset", cfg.db);
        }
        let schema = apijet_exec::load_schema(&backend)
            .await
            .map_err(|e| e.to_string())?;
        // A demo database names many tables it does not have; a few lines say enough.
        for w in schema.warnings.iter().take(3) {
            eprintln!("apijet: warning: {w}");
        }
        if schema.warnings.len() > 3 {
            eprintln!(
                "apijet: warning: … and {} more Access rows skipped",
                schema.warnings.len() - 3
            );
        }
        Ok(AppState {
            dialect: backend.dialect(),
            backend,
            schema: Arc::new(schema),
            options: PlanOptions {
                debug: cfg.debug,
                max_count: cfg.max_count,
                max_page: cfg.max_page,
                max_depth: cfg.max_depth,
                max_objects: cfg.max_objects,
                ..PlanOptions::default()
            },
        })
    }

    /// Answers one APIJSON call; errors become the envelope with their code.
    pub async fn answer(
        self: &Arc<Self>,
        method: &str,
        tag: Option<&str>,
        query: &[(String, String)],
        body: &[u8],
    ) -> Answer {
        match self.run(method, tag, query, body).await {
            Ok(a) => a,
            Err(e) => Answer::Json(self.failure(&e)),
        }
    }

    /// The error envelope (server faults are logged once, here).
    pub fn failure(&self, e: &ApiError) -> Json {
        if e.code() == 500 {
            tracing::error!(error = %e, "request failed");
        }
        failure(e, self.options.debug)
    }

    async fn run(
        self: &Arc<Self>,
        method: &str,
        tag: Option<&str>,
        query: &[(String, String)],
        body: &[u8],
    ) -> Result<Answer, ApiError> {
        let method =
            Method::from_url(method).ok_or_else(|| ApiError::UnknownMethod(method.to_string()))?;
        let mut map = parse_body(body)?;
        if let Some(tag) = tag {
            map = wrap_tag(map, tag, method);
        }
        for (k, v) in query {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Json::String(v.clone()));
            map.insert(k.clone(), value);
        }
        let req = Request::from_map(map)?;
        match method {
            Method::Get | Method::Head => {}
            // Private methods need a login first (§13.2); sessions arrive with the access work.
            _ => return Err(PlanError::NotLoggedIn.into()),
        }
        let env = ReadEnv {
            backend: &self.backend,
            dialect: self.dialect.as_ref(),
            schema: &self.schema,
            options: &self.options,
            method,
            visitor: None,
        };
        if let Some(list) = list_query(&req, &env)? {
            let Some(stmt) = list.statement else {
                return Ok(Answer::Json(success(Map::new(), false)));
            };
            let (tx, rx) = mpsc::channel(STREAM_CHANNEL);
            let state = Arc::clone(self);
            tokio::spawn(async move {
                let mut sink = StreamSink::new(
                    tx.clone(),
                    &list.list_key,
                    list.wrap_key.as_deref(),
                    list.json_outputs,
                );
                match state.backend.fetch(&stmt, &mut sink).await {
                    Ok(_) => {
                        let _ = sink.finish(now_ms()).await;
                    }
                    Err(e) => {
                        let _ = tx.send(Chunk::Fail(e.into())).await;
                    }
                }
            });
            return Ok(Answer::Stream(rx));
        }
        let results = read(&req, &env).await?;
        Ok(Answer::Json(success(results, req.format)))
    }
}

/// The tag shortcut `/{method}/{tag}` (§1.3): the body is the content of the tag.
fn wrap_tag(body: Map<String, Json>, tag: &str, method: Method) -> Map<String, Json> {
    let mut out = Map::new();
    if body.contains_key(tag) || tag.ends_with(":[]") {
        out = body;
    } else if is_table_key(tag) {
        out.insert(tag.to_string(), Json::Object(body));
    } else if let Some(table) = tag.strip_suffix("[]").filter(|t| is_table_key(t)) {
        let key = if matches!(method, Method::Get | Method::Gets) {
            tag
        } else {
            table
        };
        out.insert(key.to_string(), Json::Object(body));
    } else {
        out = body;
    }
    out.insert("tag".into(), Json::String(tag.to_string()));
    out
}

/// `apijet demo --db URL`: (re)creates the demo dataset.
pub async fn load_demo(db: &str) -> Result<(), String> {
    let url = DbUrl::parse(db).map_err(|e| e.to_string())?;
    let backend = Backend::connect(&url, 1, 0, true)
        .await
        .map_err(|e| e.to_string())?;
    backend
        .execute_script(&crate::demo::demo_statements(backend.engine()))
        .await
        .map_err(|e| e.to_string())?;
    println!("demo dataset loaded into {db}");
    Ok(())
}
