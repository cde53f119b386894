//! The pipeline for one request, stage after stage: request → plan/exec → response.

use crate::config::Config;
use crate::edge::Facts;
use crate::login_limit::{LoginLimiter, LoginLimits};
use crate::session::Sessions;
use crate::snapshot::load_snapshot;
pub use crate::snapshot::Snapshot;
use apijet_auth::TokenKey;
use apijet_core::Method;
use apijet_core::Visitor;
use apijet_exec::ids::IdGenerator;
use apijet_exec::queue::{QueueConfig, WriteQueue};
use apijet_exec::write::{single_insert, single_insert_answer, write, WriteEnv};
use apijet_exec::{Backend, DbRole, DbUrl};
use apijet_plan::verify::{verify, verify_whitelisted, ExistenceCheck};
use apijet_plan::write_plan::{WriteInputs, WritePlan};
use apijet_plan::{ExprLimits, PlanError, PlanOptions};
use apijet_request::{is_table_key, parse_body, Request};
use apijet_response::stream::Chunk;
use apijet_response::{failure, success, ApiError};
use apijet_sql::Dialect;
use arc_swap::ArcSwap;
use serde_json::{Map, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// An answer: a JSON document, or a list streaming from the database.
pub enum Answer {
    /// The whole answer.
    Json(Json),
    /// The whole answer of a read, with the number of statements it ran.
    Counted(Json, usize),
    /// Chunks of a streamed list; the first one decides between data and an error envelope.
    Stream(mpsc::Receiver<Chunk>),
    /// The whole answer of a read already written as JSON (a point lookup; code 200).
    Bytes {
        /// The answer.
        body: bytes::Bytes,
        /// Statements it ran.
        statements: usize,
        /// Rows it holds.
        rows: u64,
    },
}

/// Chunks in flight per streamed answer: with ~32 KiB chunks this bounds a stream's buffer.
pub(crate) const STREAM_CHANNEL: usize = 2;

/// What every request shares; built once at start-up.
pub struct AppState {
    pub backend: Arc<Backend>,
    /// Read replicas for GET and HEAD (none: everything on `backend`).
    replicas: Vec<Arc<Backend>>,
    next_replica: AtomicUsize,
    pub dialect: Box<dyn Dialect>,
    snapshot: ArcSwap<Snapshot>,
    pub options: PlanOptions,
    pub sessions: Sessions,
    /// Verification codes and the account endpoints' settings.
    pub accounts: crate::account::Accounts,
    /// User ids allowed to `POST /reload`.
    pub admins: Vec<i64>,
    /// Ids for inserted rows.
    pub ids: IdGenerator,
    /// Most rows in one batch write.
    pub max_batch: usize,
    /// Group commit of single-row inserts, when on.
    queue: Option<WriteQueue>,
    /// Counters for `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Requests slower than this are logged with their SQL and plan.
    slow: Option<Duration>,
    /// What visitors who are not logged in may cost at once.
    pub(crate) anonymous: Arc<crate::anonymous::AnonymousReads>,
}

impl AppState {
    /// Connects, seeds the default SQLite database on first start, and loads the snapshot.
    pub async fn start(cfg: &Config) -> Result<AppState, String> {
        let url = DbUrl::parse(&cfg.db).map_err(|e| e.to_string())?;
        // A SQLite file that does not exist yet is created and seeded with the demo dataset.
        let seed = matches!(&url, DbUrl::Sqlite(p) if !std::path::Path::new(p).exists());
        let role = DbRole::Primary {
            replicated: !cfg.read_replicas.is_empty(),
        };
        let mut backend =
            Backend::connect(&url, cfg.pool_size, cfg.statement_timeout_ms, seed, role)
                .await
                .map_err(|e| e.to_string())?;
        // A value the answer could never hold, the engine need not make; what a request may
        // store stays storable.
        backend.set_max_value_bytes(cfg.max_answer_bytes.max(cfg.max_body_bytes) + 1024);
        let replicas = connect_replicas(cfg, &backend).await?;
        if seed {
            backend
                .execute_script(&crate::demo::demo_statements(backend.engine()))
                .await
                .map_err(|e| format!("cannot create the demo database: {e}"))?;
            eprintln!("apijet: created {} with the demo dataset", cfg.db);
        }
        let key = match &cfg.token_secret {
            Some(secret) if !secret.is_empty() => TokenKey::new(secret.as_bytes()),
            _ => {
                eprintln!(
                    "apijet: WARNING: no token_secret configured; using a random key. Logins end \
                     when this process stops and other instances will not accept its tokens. \
                     Set token_secret (or APIJET_TOKEN_SECRET) in production."
                );
                TokenKey::random()?
            }
        };
        apijet_exec::stats::set_slow_statement(
            (cfg.slow_request_ms > 0).then(|| Duration::from_millis(cfg.slow_request_ms)),
        );
        let snapshot = load_snapshot(&backend, cfg.debug, cfg.max_batch).await?;
        let metrics = Arc::new(crate::metrics::Metrics::new(
            snapshot.schema.tables().map(|t| t.api_name.as_str()),
        ));
        let backend = Arc::new(backend);
        let served = served_names(backend.engine(), &cfg.db);
        let sort_unordered_groups = backend.engine() != apijet_core::Engine::MySql;
        let ids = match cfg.instance_id {
            Some(id) => IdGenerator::for_instance(id)?,
            None => IdGenerator::new(),
        };
        let engine = backend.engine();
        Ok(AppState {
            replicas,
            next_replica: AtomicUsize::new(0),
            metrics,
            slow: (cfg.slow_request_ms > 0).then(|| Duration::from_millis(cfg.slow_request_ms)),
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
            backend,
            snapshot: ArcSwap::from_pointee(snapshot),
            options: PlanOptions {
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
                served,
                sort_unordered_groups,
                ..PlanOptions::default()
            },
            accounts: crate::account::Accounts::new(cfg),
            sessions: Sessions {
                key,
                ttl: Duration::from_secs(cfg.token_ttl_secs),
                limiter: LoginLimiter::new(LoginLimits {
                    per_phone: cfg.login_failures_per_phone,
                    per_address: cfg.login_failures_per_address,
                    lockout: Duration::from_secs(cfg.login_lockout_secs),
                    entries: cfg.login_limit_entries,
                }),
            },
            admins: cfg.admins.clone(),
            ids,
            max_batch: cfg.max_batch,
            anonymous: crate::anonymous::AnonymousReads::new(
                cfg.anonymous_reads_per_address,
                Duration::from_millis(cfg.anonymous_statement_timeout_ms),
            ),
        })
    }

    /// Where a read runs: GET and HEAD go to the read replicas in turn, when there are any;
    /// everything else (private reads, the reads of `/crud`, logins) to the primary.
    pub(crate) fn reader(&self, method: Method) -> &Arc<Backend> {
        if self.replicas.is_empty() || !matches!(method, Method::Get | Method::Head) {
            return &self.backend;
        }
        let i = self.next_replica.fetch_add(1, Ordering::Relaxed);
        &self.replicas[i % self.replicas.len()]
    }

    pub(crate) fn write_env<'a>(
        &'a self,
        visitor: Option<&'a Visitor>,
        snapshot: &'a Snapshot,
    ) -> WriteEnv<'a> {
        WriteEnv {
            backend: &self.backend,
            dialect: self.dialect.as_ref(),
            schema: &snapshot.schema,
            visitor,
            ids: &self.ids,
            max_insert_rows: self.max_batch,
            envelope: &apijet_response::Envelopes,
        }
    }

    /// Plans a verified write; `trusted` for the server's own (`/register`, accounts).
    pub(crate) fn plan_write(
        &self,
        req: &Request,
        checks: &[ExistenceCheck],
        method: Method,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
        trusted: bool,
    ) -> Result<WritePlan, PlanError> {
        let inputs = WriteInputs {
            schema: &snapshot.schema,
            options: &self.options,
            method,
            visitor,
            trusted,
        };
        WritePlan::build(req, checks, &inputs)
    }

    /// The current snapshot; cheap, and stable for as long as the caller holds it.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Re-reads the schema and configuration tables and swaps them in; a failure keeps the old.
    pub async fn reload(&self) -> Result<(), String> {
        let fresh = load_snapshot(&self.backend, self.options.debug, self.max_batch).await?;
        self.snapshot.store(Arc::new(fresh));
        Ok(())
    }

    /// Answers one APIJSON call; errors become the envelope with their code.
    pub async fn answer(self: &Arc<Self>, call: Call<'_>, facts: &mut Facts) -> Answer {
        let started = std::time::Instant::now();
        let (method, body) = (call.method, call.body);
        let mut watch = apijet_exec::cancel::current();
        if call.visitor.is_none() {
            watch = watch.with_timeout(self.anonymous.timeout, "anonymous_statement_timeout_ms");
        }
        // Boxed: the future of a call is moved through every layer of the HTTP stack, and
        // moving it costs what it weighs.
        let answer =
            match apijet_exec::cancel::watched(watch, Box::pin(self.run(call, facts))).await {
                Ok(a) => a,
                Err(e) => Answer::Json(self.failure(&e)),
            };
        if let Some(slow) = self.slow.filter(|s| started.elapsed() >= *s) {
            // Its slow statements are logged with their plans where they run (exec).
            tracing::warn!(
                target: "apijet::slow",
                method,
                ms = started.elapsed().as_millis() as u64,
                threshold_ms = slow.as_millis() as u64,
                request = %String::from_utf8_lossy(&body[..body.len().min(2048)]),
                "slow request"
            );
        }
        answer
    }

    /// The error envelope (server faults are logged once, here).
    pub fn failure(&self, e: &ApiError) -> Json {
        if e.client_left() {
            tracing::debug!("the client left before its answer was complete");
        } else if e.code() == 500 {
            tracing::error!(error = %e, "request failed");
        } else if e.is_database_refusal() {
            tracing::warn!(code = e.code(), error = %e, "the database refused a request");
        }
        failure(e, self.options.debug)
    }

    async fn run(self: &Arc<Self>, call: Call<'_>, facts: &mut Facts) -> Result<Answer, ApiError> {
        let method = Method::from_url(call.method)
            .ok_or_else(|| ApiError::UnknownMethod(call.method.to_string()))?;
        let started = std::time::Instant::now();
        let mut map = parse_body(call.body)?;
        facts.parse = Some(started.elapsed());
        if let Some(tag) = call.tag {
            map = wrap_tag(map, tag, method);
        }
        for (k, v) in call.query {
            let value = serde_json::from_str(v).unwrap_or_else(|_| Json::String(v.clone()));
            map.insert(k.clone(), value);
        }
        crate::observe::note_tables(&self.metrics, &map, facts);
        let visitor = call.visitor.as_ref();
        check_login_schema(visitor, &map, &self.options)?;
        if !method.is_public() && visitor.is_none() {
            // Every private method needs a login before anything else (§13.2).
            return Err(PlanError::NotLoggedIn.into());
        }
        let snapshot = self.snapshot();
        let map = match method {
            Method::Get | Method::Head => map,
            Method::Gets | Method::Heads => self.verify(method, map, &snapshot)?,
            Method::Post | Method::Put | Method::Delete => {
                let verified = verify(method, map, &snapshot.rules)?;
                let req = Request::from_map(verified.request)?;
                let plan =
                    self.plan_write(&req, &verified.checks, method, visitor, &snapshot, false)?;
                if let Some(answer) = self.queued(&plan, visitor, &snapshot).await? {
                    return Ok(Answer::Json(success(answer, req.format)));
                }
                let env = self.write_env(visitor, &snapshot);
                let results = write(&plan, &env).await?;
                return Ok(Answer::Json(success(results, req.format)));
            }
            Method::Crud => return self.crud(map, visitor, &snapshot).await,
        };
        // Held until the answer is complete, by the task of a streamed one.
        let permit = match (visitor, crate::server::peer()) {
            (None, Some(addr)) => self
                .anonymous
                .admit(addr)
                .map_err(ApiError::TooManyRequests)?,
            _ => None,
        };
        self.read(map, method, visitor, snapshot, permit, facts)
            .await
    }

    /// A single-row POST goes through the write queue when it is on.
    async fn queued(
        &self,
        plan: &WritePlan,
        visitor: Option<&Visitor>,
        snapshot: &Snapshot,
    ) -> Result<Option<Map<String, Json>>, ApiError> {
        let Some(queue) = &self.queue else {
            return Ok(None);
        };
        let env = self.write_env(visitor, snapshot);
        let Some((key, insert, id)) = single_insert(plan, &env)? else {
            return Ok(None);
        };
        queue.insert(insert).await?;
        let mut out = Map::new();
        out.insert(key, Json::Object(single_insert_answer(&env, id)));
        Ok(Some(out))
    }

    /// `/register`: a POST with tag `register` (the `Request` row decides the shape: typically
    /// `Privacy` with `phone` and `_password`, `User` with `name`, `"id@": "Privacy/id"`). It runs
    /// without a login and without the `Access` role lists, as the reference's demo does; the
    /// structure is what keeps it in bounds.
    /// The verification code (`verify`, type 1 of `/post/verify`) is checked first and spent
    /// when the account is made; the phone is stored in its canonical spelling and the
    /// passwords as `password_storage` says (crate::account).
    pub async fn register(&self, body: &[u8], address: Option<std::net::IpAddr>) -> Json {
        let mut map = match parse_body(body) {
            Ok(m) => m,
            Err(e) => return self.failure(&e.into()),
        };
        let phone = match self.check_registration(&mut map, address).await {
            Ok(phone) => phone,
            Err(e) => return self.account_failure(&e),
        };
        match self.register_inner(map).await {
            Ok(v) => {
                self.forget_codes(crate::account::CodeType::Register, &phone)
                    .await;
                v
            }
            Err(e) => self.failure(&e),
        }
    }

    async fn register_inner(&self, mut map: Map<String, Json>) -> Result<Json, ApiError> {
        map.insert("tag".into(), Json::String("register".into()));
        map.remove("verify");
        let snapshot = self.snapshot();
        // No login and no Access lists here: the structure is all that bounds a sign-up, so it
        // is read as a whitelist (a sign-up that could set `User.contactIdList` would forge the
        // CONTACT and CIRCLE reach of every later login).
        let mut verified = verify_whitelisted(Method::Post, map, &snapshot.rules)?;
        self.seal_passwords(&mut verified.request).await?;
        let req = Request::from_map(verified.request)?;
        let plan = self.plan_write(&req, &verified.checks, Method::Post, None, &snapshot, true)?;
        let results = write(&plan, &self.write_env(None, &snapshot)).await?;
        Ok(success(results, false))
    }

    /// GETS and HEADS: the `Request` table's structure decides what may run.
    pub(crate) fn verify(
        &self,
        method: Method,
        map: Map<String, Json>,
        snapshot: &Snapshot,
    ) -> Result<Map<String, Json>, ApiError> {
        Ok(verify(method, map, &snapshot.rules)?.request)
    }
}

/// One call as the HTTP edge received it.
pub struct Call<'a> {
    /// The `/{method}` segment.
    pub method: &'a str,
    /// The `/{method}/{tag}` segment.
    pub tag: Option<&'a str>,
    /// URL query parameters, merged into the root.
    pub query: &'a [(String, String)],
    /// The body.
    pub body: &'a [u8],
    /// Who is calling.
    pub visitor: Option<Visitor>,
}

/// Runs the producer of a streamed answer in a task of its own, under the request's watch.
/// When the body is dropped (the client left), the producer is dropped with its statement
/// future, which cancels the statement; a SQLite statement, which runs on the thread, sees the
/// closed channel in its progress handler.
pub(crate) fn spawn_producer<F>(tx: mpsc::Sender<Chunk>, produce: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let probe = tx.clone();
    let watch = apijet_exec::cancel::current().with_client(Arc::new(move || probe.is_closed()));
    tokio::spawn(apijet_exec::cancel::watched(watch, async move {
        tokio::select! {
            () = produce => {}
            () = tx.closed() => {
                tracing::debug!("the client of a streamed answer left; its statement is stopped");
            }
        }
    }));
}

/// Connects to the read replicas. One that is down at start-up is an error, as the primary is:
/// a typo in a URL should not pass for an outage.
async fn connect_replicas(cfg: &Config, primary: &Backend) -> Result<Vec<Arc<Backend>>, String> {
    let mut replicas = Vec::new();
    for u in &cfg.read_replicas {
        let url = DbUrl::parse(u).map_err(|e| e.to_string())?;
        if url.engine() != primary.engine() || url.engine() == apijet_core::Engine::Sqlite {
            return Err(format!(
                "read replica '{u}': replicas must be PostgreSQL or MySQL servers of the same engine as db"
            ));
        }
        let replica = Backend::connect(
            &url,
            cfg.pool_size,
            cfg.statement_timeout_ms,
            false,
            DbRole::Replica,
        )
        .await
        // The error names the replica's host, database and user (not its password).
        .map_err(|e| format!("read replica (setting read_replicas): {e}"))?;
        replicas.push(Arc::new(replica));
    }
    Ok(replicas)
}

/// A login whose `defaults` named a schema this server does not serve: the reference reads
/// that schema for every request of the login without a `@schema` of its own, so such a
/// request is refused, naming it, rather than answered from another schema.
fn check_login_schema(
    visitor: Option<&Visitor>,
    map: &Map<String, Json>,
    options: &PlanOptions,
) -> Result<(), PlanError> {
    let Some(schema) = visitor.and_then(|v| v.foreign_schema.as_deref()) else {
        return Ok(());
    };
    if map.contains_key("@schema") {
        return Ok(());
    }
    Err(PlanError::Invalid(format!(
        "this login's defaults name @schema:\"{schema}\", which this server does not serve (it \
         serves {}): log in again with defaults.@schema naming it, or without it, or give the \
         request its own @schema",
        options.served.schemas.join(" / ")
    )))
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

/// `apijet demo --db URL`: (re)creates the demo dataset. Without `force` it refuses, changing
/// nothing, when a table it would drop holds rows.
pub async fn load_demo(db: &str, force: bool) -> Result<(), String> {
    let url = DbUrl::parse(db).map_err(|e| e.to_string())?;
    let backend = Backend::connect(&url, 1, 0, true, DbRole::Primary { replicated: false })
        .await
        .map_err(|e| e.to_string())?;
    if !force {
        let occupied = crate::demo::guard::occupied_tables(&backend).await?;
        if !occupied.is_empty() {
            return Err(crate::demo::guard::refusal(&occupied));
        }
    }
    backend
        .execute_script(&crate::demo::demo_statements(backend.engine()))
        .await
        .map_err(|e| e.to_string())?;
    println!("demo dataset loaded into {db}");
    Ok(())
}

/// The names `@database` and `@schema` may give: the engine as the reference names it, and the
/// database (MariaDB) or schema (PostgreSQL) the URL connects to.
fn served_names(engine: apijet_core::Engine, url: &str) -> apijet_plan::keywords::Served {
    use apijet_core::Engine;
    let db = url
        .split('?')
        .next()
        .and_then(|u| u.split_once("://").map(|(_, rest)| rest))
        .and_then(|rest| rest.split_once('/').map(|(_, db)| db.to_string()))
        .filter(|db| !db.is_empty() && !db.contains('/'));
    let (databases, mut schemas): (&[&str], Vec<String>) = match engine {
        Engine::Sqlite => (&["SQLITE"], vec!["main".into()]),
        Engine::Postgres => (&["POSTGRESQL"], vec!["public".into()]),
        Engine::MySql => (&["MYSQL", "MARIADB"], Vec::new()),
    };
    if engine != Engine::Sqlite {
        schemas.extend(db);
    }
    apijet_plan::keywords::Served {
        databases: databases.iter().map(|d| d.to_string()).collect(),
        schemas,
    }
}
