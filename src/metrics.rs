//! Prometheus metrics: fixed arrays of atomic counters, rendered as text only when scraped.
//!
//! A request costs a few relaxed atomic additions and no allocation: the labels (method, table,
//! APIJSON code) are indexes into arrays sized at start-up. Table names come from the schema
//! loaded at start; a table added by a later reload is counted under `table="other"`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

/// The `method` label: the APIJSON methods, the session routes, and everything else.
pub const METHODS: [&str; 13] = [
    "get", "head", "gets", "heads", "post", "put", "delete", "crud", "login", "logout", "register",
    "reload", "other",
];

/// The `code` label: the APIJSON codes apijet answers; anything else counts as `other`.
const CODES: [u16; 15] = [
    200, 400, 401, 403, 404, 405, 406, 407, 408, 409, 412, 413, 429, 500, 503,
];

/// Upper bounds of the latency buckets, in seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Upper bounds of the statements-per-request and batch-size buckets.
const COUNT_BUCKETS: [f64; 9] = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 256.0];

/// A Prometheus histogram over fixed buckets.
struct Histogram {
    bounds: &'static [f64],
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    /// The sum in millionths of the unit, so that it stays an integer.
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            buckets: (0..bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|b| value <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micros
            .fetch_add((value * 1_000_000.0) as u64, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, n) in self.bounds.iter().zip(self.buckets.iter()) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}"
            );
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Relaxed) as f64 / 1_000_000.0;
        let braces = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!("{{{s}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {count}", braces(labels));
    }
}

/// One metric of one value, with its help and type lines.
fn scalar(out: &mut String, name: &str, help: &str, kind: &str, value: impl std::fmt::Display) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// Everything `/metrics` reports that the HTTP edge and the pipeline count.
pub struct Metrics {
    /// Table names known at start-up, sorted; index `tables.len()` is `other`.
    tables: Vec<Box<str>>,
    /// `[method][table][code]`, flattened.
    requests: Box<[AtomicU64]>,
    latency: Vec<Histogram>,
    statements: Histogram,
    rows_streamed: AtomicU64,
    bytes_streamed: AtomicU64,
    connections_open: AtomicI64,
    connections_refused: AtomicU64,
    timeouts: AtomicU64,
    slow_requests: AtomicU64,
    live: LiveCounters,
    /// What the answer cache counts (`pipeline::cache`).
    pub answer_cache: std::sync::Arc<CacheCounters>,
}

/// What the answer cache counts.
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// Reads answered from memory.
    pub hits: AtomicU64,
    /// Reads looked up and not found (or found dead).
    pub misses: AtomicU64,
    /// Answers the store dropped to stay within its bytes.
    pub evictions: AtomicU64,
    /// Answers found dead: a table they read was written, or their time was up.
    pub invalidations: AtomicU64,
    /// Reads that missed while another read of the same key was under way, and waited for it
    /// instead of reading too (single flight).
    pub waited: AtomicU64,
    /// Bytes the kept answers hold.
    pub bytes: AtomicU64,
}

impl CacheCounters {
    fn render(&self, out: &mut String) {
        for (name, help, value) in [
            (
                "apijet_answer_cache_hits_total",
                "Reads answered from the answer cache.",
                &self.hits,
            ),
            (
                "apijet_answer_cache_misses_total",
                "Reads looked up in the answer cache and read fresh.",
                &self.misses,
            ),
            (
                "apijet_answer_cache_evictions_total",
                "Answers dropped to keep the cache within answer_cache_bytes.",
                &self.evictions,
            ),
            (
                "apijet_answer_cache_invalidations_total",
                "Kept answers found dead: a table they read was written, or their time was up.",
                &self.invalidations,
            ),
            (
                "apijet_answer_cache_waited_total",
                "Reads that missed while the same read was under way and waited for its answer.",
                &self.waited,
            ),
        ] {
            scalar(out, name, help, "counter", value.load(Relaxed));
        }
        scalar(
            out,
            "apijet_answer_cache_bytes",
            "Bytes the answer cache holds.",
            "gauge",
            self.bytes.load(Relaxed),
        );
    }
}

/// The `method` label index for a URL segment.
pub fn method_index(segment: &str) -> usize {
    METHODS
        .iter()
        .position(|m| *m == segment)
        .unwrap_or(METHODS.len() - 1)
}

impl Metrics {
    /// Counters for the given tables (the API names of the schema).
    pub fn new<'a>(tables: impl Iterator<Item = &'a str>) -> Metrics {
        let mut tables: Vec<Box<str>> = tables.map(Box::from).collect();
        tables.sort();
        tables.dedup();
        let cells = METHODS.len() * (tables.len() + 1) * (CODES.len() + 1);
        Metrics {
            requests: (0..cells).map(|_| AtomicU64::new(0)).collect(),
            tables,
            latency: METHODS
                .iter()
                .map(|_| Histogram::new(&LATENCY_BUCKETS))
                .collect(),
            statements: Histogram::new(&COUNT_BUCKETS),
            rows_streamed: AtomicU64::new(0),
            bytes_streamed: AtomicU64::new(0),
            connections_open: AtomicI64::new(0),
            connections_refused: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            slow_requests: AtomicU64::new(0),
            live: LiveCounters::new(),
            answer_cache: std::sync::Arc::default(),
        }
    }

    /// The `table` label index of a table's API name (`other` when unknown).
    pub fn table_index(&self, api_name: &str) -> usize {
        self.tables
            .binary_search_by(|t| (**t).cmp(api_name))
            .unwrap_or(self.tables.len())
    }

    /// Counts one finished request.
    pub fn request(
        &self,
        method: usize,
        table: Option<usize>,
        code: u16,
        seconds: f64,
        statements: Option<usize>,
    ) {
        let tables = self.tables.len() + 1;
        let table = table.unwrap_or(self.tables.len()).min(tables - 1);
        let code = CODES.iter().position(|c| *c == code).unwrap_or(CODES.len());
        let method = method.min(METHODS.len() - 1);
        let cell = (method * tables + table) * (CODES.len() + 1) + code;
        self.requests[cell].fetch_add(1, Relaxed);
        self.latency[method].observe(seconds);
        if let Some(n) = statements {
            self.statements.observe(n as f64);
        }
    }

    /// Rows and bytes of a streamed list.
    pub fn streamed(&self, rows: u64, bytes: u64) {
        self.rows_streamed.fetch_add(rows, Relaxed);
        self.bytes_streamed.fetch_add(bytes, Relaxed);
    }

    /// Bytes of a streamed list, counted as they go out.
    pub fn streamed_bytes(&self, bytes: u64) {
        self.bytes_streamed.fetch_add(bytes, Relaxed);
    }

    /// A connection opened (+1) or closed (-1).
    pub fn connection(&self, delta: i64) {
        self.connections_open.fetch_add(delta, Relaxed);
    }

    /// A connection refused because `max_connections` were open.
    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Relaxed);
    }

    /// A connection closed by the header, body or idle timeout.
    pub fn timeout(&self) {
        self.timeouts.fetch_add(1, Relaxed);
    }

    /// A request over `slow_request_ms`.
    pub fn slow_request(&self) {
        self.slow_requests.fetch_add(1, Relaxed);
    }

    /// Open live subscriptions, their distinct shapes and the bytes of answers their results
    /// hold, as the scheduler last saw them.
    pub fn live_counts(&self, open: usize, shapes: usize, held_bytes: usize) {
        self.live.open.store(open as i64, Relaxed);
        self.live.shapes.store(shapes as i64, Relaxed);
        self.live.held.store(held_bytes as i64, Relaxed);
    }

    /// One refetch of a shape's `results`, with `reads` reads, that took `seconds`.
    pub fn live_refetch(&self, results: usize, reads: usize, seconds: f64) {
        self.live.refetches.fetch_add(1, Relaxed);
        self.live.refetched.fetch_add(results as u64, Relaxed);
        self.live.reads.fetch_add(reads as u64, Relaxed);
        self.live.refetch_time.observe(seconds);
    }

    /// Answers sent to subscribers.
    pub fn live_pushed(&self, events: usize) {
        self.live.pushes.fetch_add(events as u64, Relaxed);
    }

    /// The Prometheus text exposition of everything counted, plus the database counters.
    pub fn render(&self, exec: &apijet_exec::stats::Snapshot) -> String {
        let mut out = String::with_capacity(16 * 1024);
        out.push_str("# HELP apijet_requests_total Requests answered, by method, first table and APIJSON code.\n# TYPE apijet_requests_total counter\n");
        let tables = self.tables.len() + 1;
        for (m, method) in METHODS.iter().enumerate() {
            for t in 0..tables {
                let table = self.tables.get(t).map_or("other", |s| &**s);
                for c in 0..=CODES.len() {
                    let n = self.requests[(m * tables + t) * (CODES.len() + 1) + c].load(Relaxed);
                    if n == 0 {
                        continue;
                    }
                    let code = CODES.get(c).map_or("other".to_string(), u16::to_string);
                    let _ = writeln!(
                        out,
                        "apijet_requests_total{{method=\"{method}\",table=\"{table}\",code=\"{code}\"}} {n}"
                    );
                }
            }
        }
        out.push_str("# HELP apijet_request_duration_seconds Time from the request's headers to its answer's headers.\n# TYPE apijet_request_duration_seconds histogram\n");
        for (m, method) in METHODS.iter().enumerate() {
            if self.latency[m].count.load(Relaxed) > 0 {
                self.latency[m].render(
                    &mut out,
                    "apijet_request_duration_seconds",
                    &format!("method=\"{method}\""),
                );
            }
        }
        out.push_str("# HELP apijet_sql_statements_per_request SQL statements run by one read.\n# TYPE apijet_sql_statements_per_request histogram\n");
        self.statements
            .render(&mut out, "apijet_sql_statements_per_request", "");
        let counters: [(&str, &str, u64); 6] = [
            (
                "apijet_rows_streamed_total",
                "Rows sent in streamed lists.",
                self.rows_streamed.load(Relaxed),
            ),
            (
                "apijet_bytes_streamed_total",
                "Bytes sent in streamed lists.",
                self.bytes_streamed.load(Relaxed),
            ),
            (
                "apijet_connections_refused_total",
                "Connections refused because max_connections were open.",
                self.connections_refused.load(Relaxed),
            ),
            (
                "apijet_connection_timeouts_total",
                "Connections closed by the header, body or idle timeout.",
                self.timeouts.load(Relaxed),
            ),
            (
                "apijet_slow_requests_total",
                "Requests slower than slow_request_ms.",
                self.slow_requests.load(Relaxed),
            ),
            (
                "apijet_write_queue_rows_total",
                "Rows written by the write queue.",
                exec.queue_rows,
            ),
        ];
        for (name, help, value) in counters {
            scalar(&mut out, name, help, "counter", value);
        }
        let gauges: [(&str, &str, i64); 3] = [
            (
                "apijet_connections_open",
                "Client connections open.",
                self.connections_open.load(Relaxed),
            ),
            (
                "apijet_pool_in_use",
                "Database connections lent out.",
                exec.pool_in_use,
            ),
            (
                "apijet_pool_waiting",
                "Requests waiting for a database connection.",
                exec.pool_waiting,
            ),
        ];
        for (name, help, value) in gauges {
            scalar(&mut out, name, help, "gauge", value);
        }
        scalar(
            &mut out,
            "apijet_write_queue_batches_total",
            "Group commits of the write queue.",
            "counter",
            exec.queue_batches,
        );
        scalar(
            &mut out,
            "apijet_write_queue_wait_seconds_total",
            "Time rows waited in the write queue before their batch started.",
            "counter",
            exec.queue_wait_micros as f64 / 1_000_000.0,
        );
        scalar(
            &mut out,
            "apijet_write_queue_batch_rows_max",
            "Largest group commit so far.",
            "gauge",
            exec.queue_batch_max,
        );
        self.live.render(&mut out);
        self.answer_cache.render(&mut out);
        out
    }
}

/// What live answers count (`/subscribe`).
struct LiveCounters {
    open: AtomicI64,
    shapes: AtomicI64,
    held: AtomicI64,
    refetches: AtomicU64,
    refetched: AtomicU64,
    reads: AtomicU64,
    pushes: AtomicU64,
    refetch_time: Histogram,
}

impl LiveCounters {
    fn new() -> LiveCounters {
        LiveCounters {
            open: AtomicI64::new(0),
            shapes: AtomicI64::new(0),
            held: AtomicI64::new(0),
            refetches: AtomicU64::new(0),
            refetched: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            pushes: AtomicU64::new(0),
            refetch_time: Histogram::new(&LATENCY_BUCKETS),
        }
    }

    fn render(&self, out: &mut String) {
        let rows: [(&str, &str, &str, i64); 7] = [
            (
                "apijet_live_subscriptions",
                "Open live subscriptions.",
                "gauge",
                self.open.load(Relaxed),
            ),
            (
                "apijet_live_shapes",
                "Distinct shapes of the open subscriptions (the cost of a refetch round).",
                "gauge",
                self.shapes.load(Relaxed),
            ),
            (
                "apijet_live_held_bytes",
                "Bytes of answers live answers hold: each result's latest until its streams took it, and the bases of patches.",
                "gauge",
                self.held.load(Relaxed),
            ),
            (
                "apijet_live_refetches_total",
                "Refetches of a shape.",
                "counter",
                self.refetches.load(Relaxed) as i64,
            ),
            (
                "apijet_live_results_refetched_total",
                "Distinct results answered by refetches.",
                "counter",
                self.refetched.load(Relaxed) as i64,
            ),
            (
                "apijet_live_reads_total",
                "Reads run by refetches (one per shape's chunk read together, one per result read alone).",
                "counter",
                self.reads.load(Relaxed) as i64,
            ),
            (
                "apijet_live_pushes_total",
                "Answers sent to subscribers.",
                "counter",
                self.pushes.load(Relaxed) as i64,
            ),
        ];
        for (name, help, kind, value) in rows {
            scalar(out, name, help, kind, value);
        }
        out.push_str("# HELP apijet_live_refetch_seconds Time one refetch of a shape took.\n# TYPE apijet_live_refetch_seconds histogram\n");
        self.refetch_time
            .render(out, "apijet_live_refetch_seconds", "");
    }
}
