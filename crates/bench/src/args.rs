//! The kit's command line ([`BenchArgs`]) and the sizes and durations it resolves to
//! ([`Settings`]).

use crate::live_client;
use apijet_testkit::data::demo::DemoScale;
use apijet_testkit::engine::Engine;
use std::path::PathBuf;
use std::time::Duration;

/// Where the kit's settings come from (the end of its help).
macro_rules! settings_help {
    () => {
        "Settings: the flags above; --postgres-url and --mysql-url also from \
         APIJET_BENCH_POSTGRES_URL and APIJET_BENCH_MYSQL_URL, the server measured from APIJET_BIN \
         (apijet bench sets it to itself). No configuration file is read. The apijet servers it \
         starts get a settings file from the bench, and inherit this environment: an APIJET_* \
         variable set here changes what they do (and what is measured)."
    };
}

/// The scenarios, in the long help.
macro_rules! scenario_help {
    () => {
        "\
Scenarios (--scenarios, in this order):
  list    Big list: {\"TEvent[]\":{\"count\":N,\"TEvent\":{\"@column\":\"x_uin,x_send_time,…\"}}} for
          N = 10k, 100k, 1M, with and without \"x_xid{}\":[1001,1002] (two values, 55 % of rows),
          streamed, one request at a time, apijet's peak RSS sampled. Baseline: the engine's
          own client reading the same rows to /dev/null (psql COPY, mariadb --quick, sqlite3).
          Goal: ≤ 1.3× the baseline's time, RSS flat in N.
  point   Point lookup: {\"PurchSkuMaster\":{\"sku_id\":…}} with random existing keys at 16, 64,
          256, 512 connections: closed loop (peak req/s), then open loop at --rate-fraction
          of that peak (latency without coordinated omission). Ceiling: a hand-written
          endpoint (axum + the engine's driver, the same JSON answer, checked equal) loaded
          the same way; below it the same SELECT without HTTP: pgbench custom script
          (PostgreSQL) or our raw prepared client (MariaDB, SQLite).
          Goal: ≥ 0.9× the hand-written endpoint's req/s, p99 ≤ 3× median, 0 errors.
  nested  Nested list: pages of 5/20/50 Moments with their User (id@) and 5 Comments
          (Comment[] by momentId@). Prints the server's x-apijet-statements count per page
          size. Goal: statements independent of page size (≤ 1 per nesting level).
  tfb     TechEmpower-style on the scaled demo data: single query {\"Moment\":{\"id\":…}}, 20
          queries in one request (20 aliased objects), 20 updates in one PUT. Baseline: our
          raw client doing the same statements. Goal: ≥ 0.8× the raw client.
  insert  Inserts: single-row POST Comment at 1/16/64/256 clients with the write queue off and
          on, a 1,000-row batch POST, and the raw multi-row INSERT of 1,000 rows (what
          the retired bench/inserts.sh measured) as the baseline. Reports rows/s.
  live    Live answers: --live-levels subscribers (1,000 / 10,000 / 20,000) of the nested
          Moment/User/Comment request over /subscribe, one HTTP/1.1 connection each, every
          subscribed moment changed once a second by a writer outside apijet. Reports apijet's,
          the database's and the subscribers' CPU and the delay from commit to event (median,
          p99) beside Hasura's published figures. Goal: 10,000 at p99 < 1 s on 2 cores.
  cache   Answers kept in memory: hot point lookups (1,000 hot PurchSkuMaster keys) and the
          nested moment page, apijet with answer_cache = \"on\" vs apijet without it vs the
          hand-written endpoint, then both reads again with writers PUTting comments at 1 %
          of the read rate. Goal (PostgreSQL): lookups ≥ 3× the hand-written endpoint, the
          nested page ≥ 5× apijet without the cache.

Data (generated in the database, with a progress bar): t_event (2,000,000 rows),
purch_sku_master (2,000,000 rows), the demo dataset scaled to 10,000 users, 100,000 moments,
500,000 comments. --quick shrinks everything to a smoke run of seconds.

Load: oha when installed (cargo install oha --locked), else wrk (closed loop only), else a
built-in closed-loop runner; every row names its tool and loop. Output: a table per scenario on
stdout; results.json, results.md, chart.svg and results.html in --out.

Example (the README's full run):  apijet bench --out docs/bench/run
Smoke:                            apijet bench --quick --engines sqlite
Regressions against a run:        apijet bench --compare docs/bench/results.json"
    };
}

/// Load generator choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LoaderChoice {
    /// oha, else wrk, else built-in.
    Auto,
    Oha,
    Wrk,
    Builtin,
}

/// A scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum ScenarioId {
    List,
    Point,
    Nested,
    Tfb,
    Insert,
    Live,
    Cache,
}

/// `apijet bench` options: the command line of the `apijet-bench` binary, which `apijet bench`
/// runs with the same arguments.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "apijet bench",
    bin_name = "apijet bench",
    about = "Benchmark apijet against baselines on PostgreSQL, MariaDB and SQLite",
    long_about = "Benchmark apijet against baselines on PostgreSQL, MariaDB and SQLite.\n\n\
        Provisions throwaway databases (scripts/lib/db.sh) or uses the given servers, generates \
        the data, starts apijet servers (the apijet binary beside this one, or --apijet-bin), \
        measures every scenario against apijet and a baseline in the same run, and writes \
        tables, JSON and a chart.",
    after_long_help = concat!(scenario_help!(), "\n\n", settings_help!()),
    after_help = concat!(
        "Run `apijet bench --help` for the scenarios.\n\n",
        settings_help!()
    )
)]
pub struct BenchArgs {
    /// Engines, comma-separated [default: pg,mariadb,sqlite; with --compare, the old run's].
    #[arg(long, value_delimiter = ',')]
    pub engines: Option<Vec<Engine>>,
    /// Scenarios, comma-separated (they always run in the order list, point, nested, tfb,
    /// insert, live, cache) [default: all; with --compare, the old run's].
    #[arg(long, value_delimiter = ',')]
    pub scenarios: Option<Vec<ScenarioId>>,
    /// A smoke run: tiny data, short steps (seconds per engine). For CI.
    #[arg(long)]
    pub quick: bool,
    /// Output directory (default bench/out/bench-<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Use this PostgreSQL server (an admin URL) instead of a throwaway one.
    #[arg(long, env = "APIJET_BENCH_POSTGRES_URL")]
    pub postgres_url: Option<String>,
    /// Use this MariaDB/MySQL server (an admin URL) instead of a throwaway one.
    #[arg(long, env = "APIJET_BENCH_MYSQL_URL")]
    pub mysql_url: Option<String>,
    /// The database created (dropped first!) inside each server.
    #[arg(long, default_value = "apijet_bench")]
    pub database: String,
    /// Load generator.
    #[arg(long, value_enum, default_value = "auto")]
    pub loader: LoaderChoice,
    /// Seconds per load step (default 6; --quick 0.3).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Open-loop rate as a fraction of the step's closed-loop peak.
    #[arg(long, default_value_t = 0.5)]
    pub rate_fraction: f64,
    /// Point-lookup connection levels (default 16,64,256,512).
    #[arg(long, value_delimiter = ',')]
    pub connections: Option<Vec<usize>>,
    /// Rows of t_event (default 2000000).
    #[arg(long)]
    pub rows: Option<u64>,
    /// List sizes N (default 10000,100000,1000000).
    #[arg(long, value_delimiter = ',')]
    pub list_sizes: Option<Vec<u64>>,
    /// Rows of purch_sku_master (default 2000000).
    #[arg(long)]
    pub sku_rows: Option<u64>,
    /// Generated moments of the scaled demo data (default 100000; users = moments / 10).
    #[arg(long)]
    pub moments: Option<u64>,
    /// Repetitions of each single big-list request (default 3).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// The apijet binary to start (default: APIJET_BIN, else the `apijet` beside this
    /// executable; `apijet bench` sets it to itself).
    #[arg(long)]
    pub apijet_bin: Option<PathBuf>,
    /// Keep the SQLite database file after the run.
    #[arg(long)]
    pub keep_data: bool,
    /// Leave throwaway servers as scripts/lib/db.sh starts them (fsync off) instead of turning
    /// durable commits on (PostgreSQL fsync/synchronous_commit/full_page_writes, MariaDB
    /// innodb_flush_log_at_trx_commit=1).
    #[arg(long)]
    pub no_durable: bool,
    /// Measure nothing: re-render results.md, chart.svg and results.html from a results.json
    /// of an earlier run (into --out, default: beside the file).
    #[arg(long, value_name = "RESULTS_JSON")]
    pub render: Option<PathBuf>,
    /// Regression hunting: run the scenarios of an earlier run (its engines, scenarios and
    /// --quick unless given) and print, per scenario and level, the change in throughput,
    /// latency and ratio against it, flagging drops beyond the noise measured on the baselines
    /// (compare.md and compare.json in --out).
    #[arg(long, value_name = "OLD_RESULTS_JSON")]
    pub compare: Option<PathBuf>,
    /// Internal: serve the hand-written point-lookup endpoint (KEY=TABLE.COLUMN) instead of
    /// benchmarking; the kit starts it as a process of its own.
    #[arg(long, hide = true, value_name = "KEY=TABLE.COLUMN", requires_all = ["handwritten_db", "handwritten_listen"])]
    pub serve_handwritten: Option<String>,
    /// Internal: the database URL of --serve-handwritten.
    #[arg(long, hide = true)]
    pub handwritten_db: Option<String>,
    /// Internal: the HOST:PORT of --serve-handwritten.
    #[arg(long, hide = true)]
    pub handwritten_listen: Option<String>,
    /// The live scenario's options.
    #[command(flatten)]
    pub live: live_client::LiveArgs,
}

impl BenchArgs {
    /// The engines asked for, or all.
    pub fn engines(&self) -> Vec<Engine> {
        self.engines
            .clone()
            .unwrap_or_else(|| vec![Engine::Postgres, Engine::Mariadb, Engine::Sqlite])
    }

    /// The scenarios asked for, or all.
    pub fn scenarios(&self) -> Vec<ScenarioId> {
        self.scenarios.clone().unwrap_or_else(|| {
            vec![
                ScenarioId::List,
                ScenarioId::Point,
                ScenarioId::Nested,
                ScenarioId::Tfb,
                ScenarioId::Insert,
                ScenarioId::Live,
                ScenarioId::Cache,
            ]
        })
    }
}

/// The resolved sizes and durations of a run.
#[derive(Clone, Debug)]
pub struct Settings {
    pub quick: bool,
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub t_event_rows: u64,
    pub list_sizes: Vec<u64>,
    pub sku_rows: u64,
    pub point_connections: Vec<usize>,
    pub demo: DemoScale,
    pub nested_pages: Vec<u64>,
    pub nested_connections: usize,
    pub insert_clients: Vec<usize>,
    pub batch_rows: usize,
    pub tfb_connections: usize,
    pub rate_fraction: f64,
    /// Random request bodies (keys) per step.
    pub keys: usize,
    /// Live subscribers per level.
    pub live_levels: Vec<u64>,
    /// Seconds of writes per live level.
    pub live_seconds: u64,
}

impl Settings {
    pub fn from_args(a: &BenchArgs) -> Result<Settings, String> {
        let q = a.quick;
        let pick = |full: u64, quick: u64| if q { quick } else { full };
        let t_event_rows = a.rows.unwrap_or(pick(2_000_000, 3_000)).max(1);
        let list_sizes = a.list_sizes.clone().unwrap_or_else(|| {
            if q {
                vec![100, 1000]
            } else {
                vec![10_000, 100_000, 1_000_000]
            }
        });
        // The filtered variant reads x_xid 1001/1002 rows: 55 % of the table.
        if let Some(n) = list_sizes.iter().find(|&&n| n == 0 || n > t_event_rows / 2) {
            return Err(format!(
                "list size {n} needs a t_event of more than {} rows (--rows)",
                n * 2
            ));
        }
        let moments = a.moments.unwrap_or(pick(100_000, 300)).max(10);
        let duration = a.duration.unwrap_or(if q { 0.3 } else { 6.0 });
        if !(duration > 0.0 && duration < 3600.0) {
            return Err("--duration must be between 0 and 3600 seconds".into());
        }
        if !(a.rate_fraction > 0.0 && a.rate_fraction <= 1.0) {
            return Err("--rate-fraction must be in (0, 1]".into());
        }
        let point_connections =
            a.connections
                .clone()
                .unwrap_or_else(|| if q { vec![4] } else { vec![16, 64, 256, 512] });
        if point_connections.is_empty() || point_connections.contains(&0) {
            return Err("--connections needs positive levels".into());
        }
        Ok(Settings {
            quick: q,
            duration: Duration::from_secs_f64(duration),
            warmup: Duration::from_secs_f64(if q { 0.2 } else { 2.0 }),
            repeat: a.repeat.unwrap_or(if q { 1 } else { 3 }).max(1),
            t_event_rows,
            list_sizes,
            sku_rows: a.sku_rows.unwrap_or(pick(2_000_000, 2_000)).max(1),
            point_connections,
            demo: DemoScale {
                users: (moments / 10).max(1),
                moments,
            },
            nested_pages: if q { vec![5, 20] } else { vec![5, 20, 50] },
            nested_connections: if q { 4 } else { 16 },
            insert_clients: if q { vec![1, 4] } else { vec![1, 16, 64, 256] },
            batch_rows: if q { 100 } else { 1000 },
            tfb_connections: if q { 4 } else { 64 },
            rate_fraction: a.rate_fraction,
            keys: if q { 100 } else { 10_000 },
            live_levels: a.live.live_levels.clone().unwrap_or_else(|| {
                if q {
                    vec![100]
                } else {
                    vec![1_000, 10_000, 20_000]
                }
            }),
            live_seconds: a.live.live_seconds.unwrap_or(if q { 3 } else { 10 }).max(1),
        })
    }
}
