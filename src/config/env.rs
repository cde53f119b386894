//! The settings of `APIJET_*` environment variables.

use super::Partial;

/// A comma-separated variable as a list, empty items left out.
fn list(name: &str) -> Option<Vec<String>> {
    std::env::var(name).ok().map(|v| {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
}

pub(super) fn from_env() -> Result<Partial, String> {
    fn var<T: std::str::FromStr>(name: &str) -> Result<Option<T>, String> {
        match std::env::var(name) {
            Ok(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("environment variable {name}='{v}' is not valid")),
            Err(_) => Ok(None),
        }
    }
    Ok(Partial {
        db: var("APIJET_DB")?,
        listen: var("APIJET_LISTEN")?,
        debug: var("APIJET_DEBUG")?,
        max_count: var("APIJET_MAX_COUNT")?,
        max_page: var("APIJET_MAX_PAGE")?,
        max_depth: var("APIJET_MAX_DEPTH")?,
        max_objects: var("APIJET_MAX_OBJECTS")?,
        max_body_bytes: var("APIJET_MAX_BODY_BYTES")?,
        max_expr_length: var("APIJET_MAX_EXPR_LENGTH")?,
        max_expr_depth: var("APIJET_MAX_EXPR_DEPTH")?,
        max_pattern_length: var("APIJET_MAX_PATTERN_LENGTH")?,
        max_list_items: var("APIJET_MAX_LIST_ITEMS")?,
        max_rows: var("APIJET_MAX_ROWS")?,
        max_answer_bytes: var("APIJET_MAX_ANSWER_BYTES")?,
        statement_timeout_ms: var("APIJET_STATEMENT_TIMEOUT_MS")?,
        anonymous_statement_timeout_ms: var("APIJET_ANONYMOUS_STATEMENT_TIMEOUT_MS")?,
        anonymous_reads_per_address: var("APIJET_ANONYMOUS_READS_PER_ADDRESS")?,
        logins_per_client: var("APIJET_LOGINS_PER_CLIENT")?,
        work_per_instance: var("APIJET_WORK_PER_INSTANCE")?,
        trusted_proxies: list("APIJET_TRUSTED_PROXIES"),
        plan_cache_bytes: var("APIJET_PLAN_CACHE_BYTES")?,
        plan_cache_key_bytes: var("APIJET_PLAN_CACHE_KEY_BYTES")?,
        statement_cache_bytes: var("APIJET_STATEMENT_CACHE_BYTES")?,
        max_pattern_bytes: var("APIJET_MAX_PATTERN_BYTES")?,
        pool_size: var("APIJET_POOL_SIZE")?,
        token_secret: var("APIJET_TOKEN_SECRET")?,
        token_ttl_secs: var("APIJET_TOKEN_TTL_SECS")?,
        max_batch: var("APIJET_MAX_BATCH")?,
        write_queue: var("APIJET_WRITE_QUEUE")?,
        write_queue_rows: var("APIJET_WRITE_QUEUE_ROWS")?,
        write_queue_us: var("APIJET_WRITE_QUEUE_US")?,
        login_failures_per_phone: var("APIJET_LOGIN_FAILURES_PER_PHONE")?,
        login_failures_per_address: var("APIJET_LOGIN_FAILURES_PER_ADDRESS")?,
        login_lockout_secs: var("APIJET_LOGIN_LOCKOUT_SECS")?,
        login_limit_entries: var("APIJET_LOGIN_LIMIT_ENTRIES")?,
        raw_sql: None,
        procedures: None,
        instance_id: var("APIJET_INSTANCE_ID")?,
        // Space-separated: a URL's host list already uses commas.
        read_replicas: std::env::var("APIJET_READ_REPLICAS")
            .ok()
            .map(|v| v.split_whitespace().map(str::to_string).collect()),
        verify_code_ttl_secs: var("APIJET_VERIFY_CODE_TTL_SECS")?,
        verify_code_in_answer: var("APIJET_VERIFY_CODE_IN_ANSWER")?,
        header_timeout_ms: var("APIJET_HEADER_TIMEOUT_MS")?,
        body_timeout_ms: var("APIJET_BODY_TIMEOUT_MS")?,
        idle_timeout_ms: var("APIJET_IDLE_TIMEOUT_MS")?,
        drain_ms: var("APIJET_DRAIN_MS")?,
        max_connections: var("APIJET_MAX_CONNECTIONS")?,
        slow_request_ms: var("APIJET_SLOW_REQUEST_MS")?,
        server_timing: var("APIJET_SERVER_TIMING")?,
        console: var("APIJET_CONSOLE")?,
        live: var("APIJET_LIVE")?,
        live_interval_ms: var("APIJET_LIVE_INTERVAL_MS")?,
        live_poll_ms: var("APIJET_LIVE_POLL_MS")?,
        live_patch_bytes: var("APIJET_LIVE_PATCH_BYTES")?,
        live_heartbeat_ms: var("APIJET_LIVE_HEARTBEAT_MS")?,
        live_max_subscriptions: var("APIJET_LIVE_MAX_SUBSCRIPTIONS")?,
        live_max_per_visitor: var("APIJET_LIVE_MAX_PER_VISITOR")?,
        live_concurrency: var("APIJET_LIVE_CONCURRENCY")?,
        password_storage: var("APIJET_PASSWORD_STORAGE")?,
        openapi: var("APIJET_OPENAPI")?,
        metrics_listen: var("APIJET_METRICS_LISTEN")?,
        metrics_token: var("APIJET_METRICS_TOKEN")?,
        mcp: var("APIJET_MCP")?,
        mcp_max_answer_bytes: var("APIJET_MCP_MAX_ANSWER_BYTES")?,
        answer_cache: var("APIJET_ANSWER_CACHE")?,
        answer_cache_bytes: var("APIJET_ANSWER_CACHE_BYTES")?,
        answer_cache_ttl_ms: var("APIJET_ANSWER_CACHE_TTL_MS")?,
        change_poll_ms: var("APIJET_CHANGE_POLL_MS")?,
        cors_origins: list("APIJET_CORS_ORIGINS"),
        admins: match std::env::var("APIJET_ADMINS") {
            Ok(v) => Some(
                v.split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| {
                        s.trim()
                            .parse()
                            .map_err(|_| format!("APIJET_ADMINS: '{s}' is not a user id"))
                    })
                    .collect::<Result<Vec<i64>, String>>()?,
            ),
            Err(_) => None,
        },
    })
}
