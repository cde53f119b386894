//! One [`Config`], built once at start-up from defaults, a TOML file, `APIJET_*` environment
//! variables and command-line flags, in rising order of precedence.

use serde::Deserialize;
use std::path::Path;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Database URL.
    pub db: String,
    /// Listen address.
    pub listen: String,
    /// Debug mode: `@explain`, system tables, unmasked database errors.
    pub debug: bool,
    /// Largest array `count`.
    pub max_count: u64,
    /// Largest array `page`.
    pub max_page: u64,
    /// Deepest nesting.
    pub max_depth: usize,
    /// Most objects per container.
    pub max_objects: usize,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Longest text of an expression-bearing key or range string, in bytes.
    pub max_expr_length: usize,
    /// Deepest nesting of an expression (parentheses, calls, operator chains).
    pub max_expr_depth: usize,
    /// Longest LIKE or regular-expression pattern, in bytes.
    pub max_pattern_length: usize,
    /// Most items in one value list.
    pub max_list_items: usize,
    /// Most rows one nested answer holds across its nesting levels.
    pub max_rows: usize,
    /// Most bytes (approximately) one nested answer holds.
    pub max_answer_bytes: usize,
    /// Statement timeout in milliseconds (0 = none).
    pub statement_timeout_ms: u64,
    /// The statement timeout of visitors who are not logged in, in milliseconds (0 = only
    /// `statement_timeout_ms`).
    pub anonymous_statement_timeout_ms: u64,
    /// Reads one client may have under way at once without a login (0 = no limit).
    pub anonymous_reads_per_address: usize,
    /// Password checks and hashes one client may have under way at once (0 = no limit).
    pub logins_per_client: usize,
    /// Work under way per instance before it is shared fairly between clients (0 = no limit).
    pub work_per_instance: usize,
    /// Proxies (addresses and CIDR ranges) whose PROXY headers and `Forwarded` /
    /// `X-Forwarded-For` headers name the client.
    pub trusted_proxies: Vec<String>,
    /// Most bytes the read plans kept by shape may take together.
    pub plan_cache_bytes: usize,
    /// The longest request shape whose plan is kept, in bytes.
    pub plan_cache_key_bytes: usize,
    /// Most bytes of SQL text a database connection keeps prepared.
    pub statement_cache_bytes: usize,
    /// Most bytes of all LIKE and regex patterns of one request together.
    pub max_pattern_bytes: usize,
    /// Database connections per instance.
    pub pool_size: usize,
    /// The key that signs login tokens; instances sharing it accept each other's tokens.
    pub token_secret: Option<String>,
    /// How long a login lasts, in seconds (seven times longer with `remember`).
    pub token_ttl_secs: u64,
    /// User ids allowed to `POST /reload` (SIGHUP always works).
    pub admins: Vec<i64>,
    /// Most rows in one batch write (`Table[]` items, `id{}` lists); the reference allows 10.
    pub max_batch: usize,
    /// Group commit of concurrent single-row POSTs.
    pub write_queue: bool,
    /// A group commit flushes at this many rows…
    pub write_queue_rows: usize,
    /// …or this many microseconds after its first row.
    pub write_queue_us: u64,
    /// Failed logins one phone may have per `login_lockout_secs` (then 429).
    pub login_failures_per_phone: u32,
    /// Failed logins one client address may have per `login_lockout_secs` (then 429).
    pub login_failures_per_address: u32,
    /// The window of the failed-login counts, and so the longest wait.
    pub login_lockout_secs: u64,
    /// Most phones and addresses the failed-login counts remember at once.
    pub login_limit_entries: usize,
    /// Raw SQL fragments keys marked by `@raw` may use (the reference's RAW_MAP): what a
    /// client writes, and the SQL written for it.
    pub raw_sql: Vec<(String, String)>,
    /// Stored procedures and functions `"@name()": "proc(args)"` may call.
    pub procedures: Vec<String>,
    /// This instance's number (0–2047), different on every instance sharing a database: the
    /// ids it gives inserted rows never collide with another instance's. Unset: random.
    pub instance_id: Option<u16>,
    /// Read-only database URLs for GET and HEAD; everything else goes to `db`.
    pub read_replicas: Vec<String>,
    /// How long a verification code of `/post/verify` is valid, in seconds.
    pub verify_code_ttl_secs: u64,
    /// Whether `/post/verify` and `/gets/verify` answer the code (the demo's behaviour, for
    /// tests and development; in production the code reaches the phone another way).
    pub verify_code_in_answer: bool,
    /// A connection must deliver a request's line and headers within this long of its first byte.
    pub header_timeout_ms: u64,
    /// A request's body must arrive whole within this long of its headers.
    pub body_timeout_ms: u64,
    /// A keep-alive connection with no request under way is closed after this long.
    pub idle_timeout_ms: u64,
    /// Most connections open at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// After SIGTERM: how long, in milliseconds, the server goes on answering while `/health`
    /// says it is draining, before it stops accepting (0: stop at once).
    pub drain_ms: u64,
    /// Origins allowed to call from a browser: `*` (any origin, echoed, with credentials) or a
    /// list of exact origins; empty turns CORS off.
    pub cors_origins: Vec<String>,
    /// Requests slower than this many milliseconds are logged with their SQL and plan (0 = off).
    pub slow_request_ms: u64,
    /// A `Server-Timing` header on every answer.
    pub server_timing: bool,
    /// The web console at `/`.
    pub console: bool,
    /// `/subscribe`: live answers.
    pub live: bool,
    /// The least time between two refetches of one live shape, in milliseconds.
    pub live_interval_ms: u64,
    /// Refetch live answers without a mark after this long (0: only on marks). Unset: every
    /// `live_interval_ms` on MariaDB and SQLite, only on marks on PostgreSQL.
    pub live_poll_ms: Option<u64>,
    /// A comment on every idle live stream this often, in milliseconds.
    pub live_heartbeat_ms: u64,
    /// Most live subscriptions open on this instance.
    pub live_max_subscriptions: usize,
    /// Most live subscriptions one visitor (a login, else a client address) holds open.
    pub live_max_per_visitor: usize,
    /// Most reads of live refetches running at once.
    pub live_concurrency: usize,
    /// Most bytes of a subscription's answer kept as the base of its next JSON patch.
    pub live_patch_bytes: usize,
    /// How new passwords are stored: argon2id hashes, or the reference's plain text for a
    /// `Privacy` table the Java server shares. Checks accept both forms either way.
    pub password_storage: PasswordStorage,
    /// Who may read `/openapi.json`.
    pub openapi: OpenApiExposure,
    /// A separate listen address that serves only `/metrics` (empty: none).
    pub metrics_listen: String,
    /// A token `/metrics` requires as `Authorization: Bearer` (empty: none). Without either
    /// setting `/metrics` is not served.
    pub metrics_token: String,
    /// `/mcp`: the Model Context Protocol on the API's listener.
    pub mcp: bool,
    /// Most bytes of one MCP tool answer; longer answers are cut with paging guidance.
    pub mcp_max_answer_bytes: usize,
    /// Answers kept in memory: for every cacheable read, or only those that ask (`@cache`).
    pub answer_cache: AnswerCacheSetting,
    /// Most bytes the kept answers hold together.
    pub answer_cache_bytes: usize,
    /// A kept answer is read again after this long (0: only when a table it read was
    /// written). Unset: 0 on an engine with a change feed (PostgreSQL), 1000 elsewhere.
    pub answer_cache_ttl_ms: Option<u64>,
    /// How often the change table is looked at for other instances' and programs' writes
    /// (MariaDB and SQLite, once `apijet live-triggers --install` made it).
    pub change_poll_ms: u64,
}

/// Which reads' answers are kept in memory (`answer_cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerCacheSetting {
    /// Only those of requests that ask with `@cache` (0/ALL, 2/RAM).
    Off,
    /// Every cacheable read's (but those that ask `@cache`: 1/ROM).
    On,
}

impl std::str::FromStr for AnswerCacheSetting {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "off" | "false" => Ok(AnswerCacheSetting::Off),
            "on" | "true" => Ok(AnswerCacheSetting::On),
            _ => Err(()),
        }
    }
}

/// How new passwords are stored (`password_storage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PasswordStorage {
    /// argon2id PHC strings (`apijet_auth::password`).
    Argon2id,
    /// Plain text, as the Java reference stores and compares them in SQL.
    Plain,
}

impl std::str::FromStr for PasswordStorage {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "argon2id" => Ok(PasswordStorage::Argon2id),
            "plain" => Ok(PasswordStorage::Plain),
            _ => Err(()),
        }
    }
}

/// Who may read `/openapi.json` (`openapi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenApiExposure {
    /// Everyone, without system tables, `_` columns and Request structures (outside debug).
    Public,
    /// Only a server in debug mode, with everything.
    Debug,
    /// Nobody.
    Off,
}

impl std::str::FromStr for OpenApiExposure {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "public" => Ok(OpenApiExposure::Public),
            "debug" => Ok(OpenApiExposure::Debug),
            "off" => Ok(OpenApiExposure::Off),
            _ => Err(()),
        }
    }
}

/// The settings a file or the environment may give; every one optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partial {
    db: Option<String>,
    listen: Option<String>,
    debug: Option<bool>,
    max_count: Option<u64>,
    max_page: Option<u64>,
    max_depth: Option<usize>,
    max_objects: Option<usize>,
    max_body_bytes: Option<usize>,
    max_expr_length: Option<usize>,
    max_expr_depth: Option<usize>,
    max_pattern_length: Option<usize>,
    max_list_items: Option<usize>,
    max_rows: Option<usize>,
    max_answer_bytes: Option<usize>,
    statement_timeout_ms: Option<u64>,
    anonymous_statement_timeout_ms: Option<u64>,
    anonymous_reads_per_address: Option<usize>,
    logins_per_client: Option<usize>,
    work_per_instance: Option<usize>,
    trusted_proxies: Option<Vec<String>>,
    plan_cache_bytes: Option<usize>,
    plan_cache_key_bytes: Option<usize>,
    statement_cache_bytes: Option<usize>,
    max_pattern_bytes: Option<usize>,
    pool_size: Option<usize>,
    token_secret: Option<String>,
    token_ttl_secs: Option<u64>,
    admins: Option<Vec<i64>>,
    max_batch: Option<usize>,
    write_queue: Option<bool>,
    write_queue_rows: Option<usize>,
    write_queue_us: Option<u64>,
    login_failures_per_phone: Option<u32>,
    login_failures_per_address: Option<u32>,
    login_lockout_secs: Option<u64>,
    login_limit_entries: Option<usize>,
    raw_sql: Option<RawSqlSetting>,
    procedures: Option<Vec<String>>,
    instance_id: Option<u16>,
    read_replicas: Option<Vec<String>>,
    verify_code_ttl_secs: Option<u64>,
    verify_code_in_answer: Option<bool>,
    header_timeout_ms: Option<u64>,
    body_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    max_connections: Option<usize>,
    drain_ms: Option<u64>,
    cors_origins: Option<Vec<String>>,
    slow_request_ms: Option<u64>,
    server_timing: Option<bool>,
    console: Option<bool>,
    live: Option<bool>,
    live_interval_ms: Option<u64>,
    live_poll_ms: Option<u64>,
    live_heartbeat_ms: Option<u64>,
    live_max_subscriptions: Option<usize>,
    live_max_per_visitor: Option<usize>,
    live_concurrency: Option<usize>,
    live_patch_bytes: Option<usize>,
    password_storage: Option<PasswordStorage>,
    openapi: Option<OpenApiExposure>,
    metrics_listen: Option<String>,
    metrics_token: Option<String>,
    mcp: Option<bool>,
    mcp_max_answer_bytes: Option<usize>,
    answer_cache: Option<AnswerCacheSetting>,
    answer_cache_bytes: Option<usize>,
    answer_cache_ttl_ms: Option<u64>,
    change_poll_ms: Option<u64>,
}

/// The default database: a SQLite file in the working directory, seeded with the demo data.
pub const DEFAULT_DB: &str = "sqlite://apijet.db";

impl Default for Config {
    fn default() -> Self {
        Config {
            db: DEFAULT_DB.into(),
            listen: "127.0.0.1:8080".into(),
            debug: false,
            max_count: 100,
            max_page: 100,
            max_depth: 5,
            max_objects: 5,
            max_body_bytes: 1 << 20,
            max_expr_length: 1024,
            max_expr_depth: 32,
            max_pattern_length: 256,
            max_list_items: 1000,
            max_rows: 10_000,
            max_answer_bytes: 16 << 20,
            statement_timeout_ms: 30_000,
            anonymous_statement_timeout_ms: 5_000,
            anonymous_reads_per_address: 4,
            logins_per_client: 2,
            work_per_instance: 1024,
            trusted_proxies: Vec::new(),
            plan_cache_bytes: 64 << 20,
            plan_cache_key_bytes: 16 << 10,
            statement_cache_bytes: 2 << 20,
            max_pattern_bytes: 1024,
            pool_size: 2 * std::thread::available_parallelism().map_or(2, |n| n.get()) + 2,
            token_secret: None,
            token_ttl_secs: 86_400,
            admins: Vec::new(),
            max_batch: 1000,
            write_queue: true,
            write_queue_rows: 64,
            write_queue_us: 0,
            login_failures_per_phone: 5,
            login_failures_per_address: 50,
            login_lockout_secs: 300,
            login_limit_entries: 10_000,
            raw_sql: Vec::new(),
            procedures: Vec::new(),
            instance_id: None,
            read_replicas: Vec::new(),
            verify_code_ttl_secs: 60,
            verify_code_in_answer: false,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            max_connections: 4096,
            drain_ms: 5000,
            cors_origins: vec!["*".into()],
            slow_request_ms: 1000,
            server_timing: false,
            console: true,
            live: true,
            live_interval_ms: 1000,
            live_poll_ms: None,
            live_heartbeat_ms: 15_000,
            live_max_subscriptions: 10_000,
            live_max_per_visitor: 100,
            live_concurrency: 4,
            live_patch_bytes: 256 * 1024,
            password_storage: PasswordStorage::Argon2id,
            openapi: OpenApiExposure::Public,
            metrics_listen: String::new(),
            metrics_token: String::new(),
            mcp: true,
            mcp_max_answer_bytes: 32 << 10,
            answer_cache: AnswerCacheSetting::Off,
            answer_cache_bytes: 64 << 20,
            answer_cache_ttl_ms: None,
            change_poll_ms: 250,
        }
    }
}

/// `raw_sql`: a list of fragments written as they are, or a table of what a client writes →
/// the SQL written for it (an empty SQL text means the client's text itself, as in the
/// reference's RAW_MAP).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RawSqlSetting {
    List(Vec<String>),
    Map(std::collections::BTreeMap<String, String>),
}

impl RawSqlSetting {
    fn entries(self) -> Vec<(String, String)> {
        match self {
            RawSqlSetting::List(l) => l.into_iter().map(|f| (f.clone(), f)).collect(),
            RawSqlSetting::Map(m) => m
                .into_iter()
                .map(|(text, sql)| {
                    let sql = if sql.trim().is_empty() {
                        text.clone()
                    } else {
                        sql
                    };
                    (text, sql)
                })
                .collect(),
        }
    }
}

impl Config {
    fn apply(&mut self, p: Partial) {
        if let Some(raw) = p.raw_sql {
            self.raw_sql = raw.entries();
        }
        macro_rules! take {
            ($($f:ident),*) => { $( if let Some(v) = p.$f { self.$f = v; } )* };
        }
        take!(
            db,
            listen,
            debug,
            max_count,
            max_page,
            max_depth,
            max_objects,
            max_body_bytes,
            max_expr_length,
            max_expr_depth,
            max_pattern_length,
            max_list_items,
            max_rows,
            max_answer_bytes,
            statement_timeout_ms,
            anonymous_statement_timeout_ms,
            anonymous_reads_per_address,
            logins_per_client,
            work_per_instance,
            trusted_proxies,
            plan_cache_bytes,
            plan_cache_key_bytes,
            statement_cache_bytes,
            max_pattern_bytes,
            pool_size,
            token_ttl_secs,
            admins,
            max_batch,
            write_queue,
            write_queue_rows,
            write_queue_us,
            login_failures_per_phone,
            login_failures_per_address,
            login_lockout_secs,
            login_limit_entries,
            procedures,
            read_replicas,
            verify_code_ttl_secs,
            verify_code_in_answer,
            header_timeout_ms,
            body_timeout_ms,
            idle_timeout_ms,
            max_connections,
            drain_ms,
            cors_origins,
            slow_request_ms,
            server_timing,
            console,
            live,
            live_interval_ms,
            live_heartbeat_ms,
            live_max_subscriptions,
            live_max_per_visitor,
            live_concurrency,
            live_patch_bytes,
            password_storage,
            openapi,
            metrics_listen,
            metrics_token,
            mcp,
            mcp_max_answer_bytes,
            answer_cache,
            answer_cache_bytes,
            change_poll_ms
        );
        if p.answer_cache_ttl_ms.is_some() {
            self.answer_cache_ttl_ms = p.answer_cache_ttl_ms;
        }
        if p.live_poll_ms.is_some() {
            self.live_poll_ms = p.live_poll_ms;
        }
        if p.token_secret.is_some() {
            self.token_secret = p.token_secret;
        }
        if p.instance_id.is_some() {
            self.instance_id = p.instance_id;
        }
    }

    /// Builds the configuration: defaults, then `file`, then the environment, then `flags`.
    pub fn load(file: Option<&Path>, flags: Partial) -> Result<Config, String> {
        let mut c = Config::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
            let p: Partial = toml::from_str(&text)
                .map_err(|e| format!("config file {}: {e}", path.display()))?;
            c.apply(p);
        }
        c.apply(from_env()?);
        c.apply(flags);
        if c.max_count == 0 || c.max_depth == 0 || c.max_expr_depth == 0 {
            return Err("max_count, max_depth and max_expr_depth must be at least 1".into());
        }
        if c.header_timeout_ms == 0 || c.body_timeout_ms == 0 || c.idle_timeout_ms == 0 {
            return Err(
                "header_timeout_ms, body_timeout_ms and idle_timeout_ms must be at least 1".into(),
            );
        }
        if c.max_connections == 0 {
            return Err("max_connections must be at least 1".into());
        }
        if c.live_interval_ms == 0 || c.live_heartbeat_ms == 0 || c.live_concurrency == 0 {
            return Err(
                "live_interval_ms, live_heartbeat_ms and live_concurrency must be at least 1"
                    .into(),
            );
        }
        if c.mcp_max_answer_bytes < 1024 {
            return Err("mcp_max_answer_bytes must be at least 1024".into());
        }
        check_listen(&c.listen)?;
        crate::client::TrustedProxies::parse(&c.trusted_proxies)?;
        Ok(c)
    }
}

/// `listen` must be `HOST:PORT`: the bind error for `8082` alone says only "invalid socket
/// address".
fn check_listen(listen: &str) -> Result<(), String> {
    let port = listen
        .rsplit_once(':')
        .map(|(host, port)| (host, port.parse::<u16>()));
    match port {
        Some((host, Ok(_))) if !host.is_empty() => Ok(()),
        _ => {
            let port = listen
                .rsplit(':')
                .next()
                .filter(|p| p.parse::<u16>().is_ok())
                .unwrap_or("8080");
            Err(format!(
                "listen = '{listen}' is not HOST:PORT: use 127.0.0.1:{port} (this machine \
                 only), 0.0.0.0:{port} (every network interface) or [::1]:{port} (flag \
                 --listen, setting listen, variable APIJET_LISTEN)"
            ))
        }
    }
}

impl Partial {
    /// Settings given as command-line flags.
    pub fn flags(db: Option<String>, listen: Option<String>, debug: bool) -> Partial {
        Partial {
            db,
            listen,
            debug: debug.then_some(true),
            ..Partial::default()
        }
    }
}

mod env;
#[cfg(test)]
mod tests;

use env::from_env;
