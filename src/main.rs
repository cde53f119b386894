//! apijet: an APIJSON server. See README.md.

mod accounts;
mod app;
mod client;
mod config;
mod console;
mod http;
mod ledger;
mod live;
mod mcp;
mod metrics;
mod observe;
mod openapi;
mod pipeline;
mod templates;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// mimalloc: glibc malloc cost about 40 % of the instructions of a point lookup (callgrind, see
/// bench/callgrind.sh), and its per-thread arenas kept freed pages after a large answer (RSS
/// grew by ~60 MiB with each big nested answer). mimalloc purges with a delay; with
/// MIMALLOC_PURGE_DELAY=0 in the environment RSS falls back to idle right after the answer.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "apijet",
    version,
    about = "An APIJSON server over SQLite, PostgreSQL and MySQL/MariaDB",
    after_help = "Each command's --help names where its settings come from. APIJET_LOG sets the \
                  logging of every command (stderr, `warn` by default; e.g. APIJET_LOG=info)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the APIJSON API (default database: sqlite://apijet.db, created with demo data).
    Serve {
        /// sqlite://PATH, postgres://USER[:PASS]@HOST[:PORT]/DB or mysql://USER[:PASS]@HOST[:PORT]/DB
        /// (default sqlite://apijet.db; setting `db`, APIJET_DB).
        #[arg(long)]
        db: Option<String>,
        /// HOST:PORT to listen on (default 127.0.0.1:8080; setting `listen`, APIJET_LISTEN).
        #[arg(long)]
        listen: Option<String>,
        /// The TOML file of settings (every key, with its default: apijet.example.toml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Debug mode: @explain, system tables and database error details (setting `debug`,
        /// APIJET_DEBUG).
        #[arg(long)]
        debug: bool,
    },
    /// Serve the Model Context Protocol over stdio, for an AI agent host that starts apijet.
    ///
    /// The database is served as `apijet serve` serves it (same settings, rules and limits),
    /// as one visitor: a token from /login (signed with this configuration's token_secret),
    /// or a phone and password logged in at start; neither: not logged in (public reads
    /// only). Only MCP messages go to stdout; logs go to stderr.
    Mcp {
        /// sqlite://PATH, postgres://… or mysql://… (default sqlite://apijet.db)
        #[arg(long)]
        db: Option<String>,
        /// A TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Debug mode: @explain, system tables and database error details.
        #[arg(long)]
        debug: bool,
        /// A token from /login to act as.
        #[arg(long, env = "APIJET_MCP_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// The phone of the account to log in as (with --password).
        #[arg(long, env = "APIJET_MCP_PHONE")]
        phone: Option<String>,
        /// Its password (prefer the environment variable: arguments are visible to every
        /// user of the machine).
        #[arg(long, env = "APIJET_MCP_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Load the demo dataset into a database: drops and recreates its tables.
    ///
    /// The tables are apijson_user, apijson_privacy, Moment, Comment, Access, Request,
    /// Function, Verify and Document, the names of an APIJSON database. When any of them
    /// already holds rows, nothing is changed and the command fails, naming them, unless
    /// --force is given.
    Demo {
        /// sqlite://PATH (created when missing), postgres://… or mysql://…
        #[arg(long)]
        db: String,
        /// Drop and recreate the demo tables even when they hold rows (those rows are lost).
        #[arg(long)]
        force: bool,
    },
    /// Benchmark apijet against baselines on PostgreSQL, MariaDB and SQLite (see --help).
    ///
    /// Runs the benchmark kit, the `apijet-bench` binary built beside this one (cargo build
    /// --release -p apijet-bench), with these arguments, measuring this binary; the server
    /// itself never links the kit. `apijet bench --help` lists its options and scenarios.
    #[command(disable_help_flag = true)]
    Bench {
        /// The kit's arguments (`apijet bench --help` prints them).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Triggers that tell live and kept answers of writes by other instances and programs.
    ///
    /// PostgreSQL: apijet's own writes reach every instance through NOTIFY; writes by other
    /// programs need a trigger per table (one NOTIFY per statement, on channel apijet_live).
    /// MariaDB and SQLite: a change table (apijet_changes) and row triggers on every table
    /// that move its generation there, which every instance looks at (change_poll_ms).
    /// Prints the SQL (--print, the default), runs it (--install) or drops the triggers and
    /// the change table (--remove). Run again after adding tables; each run is idempotent.
    LiveTriggers {
        /// The database URL (postgres://…, mysql://…, sqlite://FILE)
        #[arg(long)]
        db: String,
        /// Run the SQL instead of printing it.
        #[arg(long, conflicts_with = "remove")]
        install: bool,
        /// Drop the triggers and their function.
        #[arg(long)]
        remove: bool,
        /// Print the SQL (the default).
        #[arg(long, conflicts_with_all = ["install", "remove"])]
        print: bool,
    },
}

/// Where `serve` and `mcp` read their settings (src/config).
const SERVE_SETTINGS: &str = "Settings come from, in rising precedence: defaults; the TOML file \
given with --config FILE (apijet.example.toml in the source lists every key with its default, the \
README's Configuration section what each does); APIJET_* environment variables, one per key in \
capitals (max_count: APIJET_MAX_COUNT; APIJET_ADMINS=1,2 and APIJET_CORS_ORIGINS=a,b \
comma-separated, APIJET_READ_REPLICAS space-separated; raw_sql and procedures only in the \
file); and the flags above. No file is read unless --config names one.";

/// `demo` and `live-triggers` take their flags and nothing else.
const FLAGS_ONLY: &str = "Settings: the flags above only; no configuration file and no \
APIJET_* variable is read (but APIJET_LOG, the logging).";

/// `bench` (crates/bench).
const BENCH_SETTINGS: &str = "Settings: the flags above; --postgres-url and --mysql-url also \
from APIJET_BENCH_POSTGRES_URL and APIJET_BENCH_MYSQL_URL. No configuration file is read. The \
apijet servers it starts get a settings file from the bench, and inherit this environment: an \
APIJET_* variable set here changes what they do (and what is measured).";

/// The command line, every subcommand's help ending with where its settings come from (after
/// what the subcommand says itself: `bench` has help of its own).
fn command_line() -> clap::Command {
    let with = |c: clap::Command, settings: &'static str| {
        let short = match c.get_after_help() {
            Some(own) => format!("{own}\n\n{settings}"),
            None => settings.to_string(),
        };
        let long = c
            .get_after_long_help()
            .map(|own| format!("{own}\n\n{settings}"));
        let c = c.after_help(short);
        match long {
            Some(long) => c.after_long_help(long),
            None => c,
        }
    };
    Cli::command()
        .mut_subcommand("serve", |c| with(c, SERVE_SETTINGS))
        // Served as `serve` serves it: the same settings, from the same places.
        .mut_subcommand("mcp", |c| with(c, SERVE_SETTINGS))
        .mut_subcommand("demo", |c| with(c, FLAGS_ONLY))
        .mut_subcommand("bench", |c| with(c, BENCH_SETTINGS))
        .mut_subcommand("live-triggers", |c| with(c, FLAGS_ONLY))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("APIJET_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::from_arg_matches(&command_line().get_matches()).unwrap_or_else(|e| e.exit());
    if let Command::Bench { args } = cli.command {
        return bench(args);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("apijet: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve {
                db,
                listen,
                config,
                debug,
            } => {
                let flags = config::Partial::flags(db, listen, debug);
                let cfg = config::Config::load(config.as_deref(), flags)?;
                http::serve(cfg).await
            }
            Command::Mcp {
                db,
                config,
                debug,
                token,
                phone,
                password,
            } => {
                let flags = config::Partial::flags(db, None, debug);
                let cfg = config::Config::load(config.as_deref(), flags)?;
                let identity = mcp::stdio::Identity {
                    token,
                    phone,
                    password,
                };
                mcp::stdio::run(cfg, identity).await
            }
            Command::Demo { db, force } => {
                apijet_demo::load(&db, force).await?;
                println!("demo dataset loaded into {db}");
                Ok(())
            }
            // Run before the runtime is built (see `bench`).
            Command::Bench { .. } => Ok(()),
            Command::LiveTriggers {
                db,
                install,
                remove,
                print: _,
            } => {
                use pipeline::feed::TriggerAction;
                let action = match (install, remove) {
                    (true, _) => TriggerAction::Install,
                    (_, true) => TriggerAction::Remove,
                    _ => TriggerAction::Print,
                };
                pipeline::feed::live_triggers(&db, action).await
            }
        }
    });
    // Tasks still parked (idle connections' watchdogs, pool reapers) are not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("apijet: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `apijet bench ARGS`: the kit's binary `apijet-bench`, beside this one, run with ARGS and
/// told to measure this binary (`APIJET_BIN`).
fn bench(args: Vec<OsString>) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("apijet bench: {msg}");
        ExitCode::FAILURE
    };
    let this = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot find this executable: {e}")),
    };
    let kit = this.with_file_name(format!("apijet-bench{}", std::env::consts::EXE_SUFFIX));
    if !kit.is_file() && args.iter().any(|a| a == "--help" || a == "-h") {
        // What the command is and where its settings come from, though the kit is not built.
        let mut cli = command_line();
        if let Some(c) = cli.find_subcommand_mut("bench") {
            let _ = c.print_long_help();
        }
        println!(
            "\n{} is not built: cargo build --release -p apijet-bench; then apijet bench --help \
             lists its options and scenarios.",
            kit.display()
        );
        return ExitCode::SUCCESS;
    }
    if !kit.is_file() {
        return fail(format!(
            "{} is missing: the benchmark kit is a binary of its own (cargo build --release -p \
             apijet-bench)",
            kit.display()
        ));
    }
    let mut cmd = std::process::Command::new(&kit);
    cmd.args(args).env("APIJET_BIN", &this);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = cmd.exec();
        fail(format!("cannot run {}: {e}", kit.display()))
    }
    #[cfg(not(unix))]
    match cmd.status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => fail(format!("cannot run {}: {e}", kit.display())),
    }
}
