//! `apijet bench`: the workloads users of APIJSON-style servers measure, run against apijet
//! and, in the same run, against a baseline without apijet, printed as one aggregate table per
//! scenario and engine and written as JSON and an SVG/HTML chart.
//!
//! The kit provisions throwaway databases through `scripts/lib/db.sh` (or uses the servers
//! given by URL), generates the data inside them, starts apijet servers from the `apijet`
//! binary (the one beside this `apijet-bench` binary, which `apijet bench` runs; the bench is
//! never linked into the server), drives the load with oha (or wrk, or a built-in
//! closed-loop runner, each labelled), and runs the baselines: the hand-written endpoint (the
//! point-lookup ceiling, [`handwritten`]), pgbench, the engines' own command-line clients, or
//! our raw client on the same drivers apijet uses. `--compare` sets a run against an earlier
//! one ([`report::compare`]).
//!
//! Layout: [`BenchArgs`] and [`Settings`] the command line, [`data`] generators, [`scenario`]
//! per workload, [`load`] drivers, [`baseline`] raw clients, [`handwritten`] the hand-written
//! endpoint, [`report`] tables/JSON/chart and comparisons, [`server`] the settings of the
//! servers under test. The databases, the server
//! launcher, the HTTP client, the data generators and the PRNG come from the dev-only test kit
//! (`apijet_testkit`), which the integration tests use too.

mod args;
pub mod baseline;
pub mod handwritten;
pub mod live_client;
pub mod load;
pub mod report;
pub mod scenario;
pub mod server;
pub mod stats;
pub mod tools;

use apijet_testkit::data;
use apijet_testkit::engine::{self, DbConn, Engine};
pub use args::{BenchArgs, LoaderChoice, ScenarioId, Settings};
use load::Loader;
use report::{Machine, Report, ScenarioReport};
use std::path::{Path, PathBuf};

/// Reads a `results.json` of an earlier run.
fn read_report(file: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a results.json: {e}", file.display()))
}

/// `/proc/loadavg` (1, 5, 15 minutes): the machine is shared, so the report says how busy it was.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Picks the load generator.
fn choose_loader(choice: LoaderChoice, tools: &tools::Tools) -> Result<Loader, String> {
    let oha = tools.oha.clone().map(Loader::Oha);
    let wrk = tools.wrk.clone().map(Loader::Wrk);
    match choice {
        LoaderChoice::Auto => Ok(oha.or(wrk).unwrap_or(Loader::Builtin)),
        LoaderChoice::Oha => {
            oha.ok_or_else(|| "oha is not installed (cargo install oha --locked)".into())
        }
        LoaderChoice::Wrk => wrk.ok_or_else(|| "wrk is not installed (apt-get install wrk)".into()),
        LoaderChoice::Builtin => Ok(Loader::Builtin),
    }
}

/// Runs the kit; the entry point of `apijet bench`.
pub async fn run(args: BenchArgs) -> Result<(), String> {
    tokio::select! {
        r = run_inner(args) => r,
        _ = tokio::signal::ctrl_c() => Err("interrupted; servers and databases stopped".into()),
    }
}

/// Writes results.md, chart.svg and results.html for `report` into `out`.
fn write_outputs(report: &Report, out: &Path) -> Result<(), String> {
    let md = report::table::report_markdown(report);
    std::fs::write(out.join("results.md"), &md)
        .map_err(|e| format!("cannot write results.md: {e}"))?;
    report::chart::write(report, out)
}

async fn run_inner(args: BenchArgs) -> Result<(), String> {
    if let (Some(spec), Some(db), Some(listen)) = (
        &args.serve_handwritten,
        &args.handwritten_db,
        &args.handwritten_listen,
    ) {
        return handwritten::serve(db, listen, handwritten::Lookup::parse(spec)?).await;
    }
    if let Some(done) = args.live.client().await {
        return done;
    }
    if let Some(file) = &args.render {
        let report = read_report(file)?;
        let out = match &args.out {
            Some(o) => o.clone(),
            None => file.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        std::fs::create_dir_all(&out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
        write_outputs(&report, &out)?;
        eprintln!(
            "[bench] wrote {}/results.md, chart.svg, results.html",
            out.display()
        );
        return Ok(());
    }
    let old: Option<Report> = match &args.compare {
        Some(file) => Some(read_report(file)?),
        None => None,
    };
    let mut args = args;
    if let Some(old) = &old {
        if !args.quick && old.quick {
            args.quick = true;
        }
        if args.engines.is_none() {
            args.engines = Some(old.engines.iter().map(|(e, _)| *e).collect());
        }
        if args.scenarios.is_none() {
            let ids: Vec<ScenarioId> = old
                .scenarios
                .iter()
                .filter_map(|s| <ScenarioId as clap::ValueEnum>::from_str(&s.id, true).ok())
                .collect();
            args.scenarios = Some(ids);
        }
    }
    let args = args;
    let settings = Settings::from_args(&args)?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let out = match &args.out {
        Some(o) => o.clone(),
        None => engine::repo_root()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("bench/out")
            .join(format!("bench-{stamp}")),
    };
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let out = out.canonicalize().unwrap_or(out);
    let tools = tools::Tools::detect();
    let loader = choose_loader(args.loader, &tools)?;
    let apijet = match &args.apijet_bin {
        Some(p) => p.clone(),
        None => server::apijet_beside()?,
    };
    let mut engines = args.engines();
    engines.dedup();
    let mut scenarios = args.scenarios();
    scenarios.sort();
    scenarios.dedup();
    eprintln!(
        "[bench] engines: {}; scenarios: {:?}; load: {}; output: {}",
        engines
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
        scenarios,
        loader.describe(),
        out.display()
    );
    let mut report = Report {
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: Machine::detect(),
        loader: loader.describe(),
        quick: settings.quick,
        loadavg_start: loadavg(),
        loadavg_end: String::new(),
        engines: Vec::new(),
        scenarios: Vec::new(),
    };
    for &engine in &engines {
        let work = out.join("work").join(engine.name());
        match run_engine(
            engine, &args, &settings, &tools, &loader, &apijet, &out, &work,
        )
        .await
        {
            Ok((version, results)) => {
                report.engines.push((engine, version));
                report.scenarios.extend(results);
            }
            Err(e) => {
                eprintln!("[bench] {}: {e}", engine.name());
                report.engines.push((engine, "unavailable".into()));
                report.scenarios.push(ScenarioReport {
                    id: "setup".into(),
                    engine,
                    title: "provisioning".into(),
                    request: String::new(),
                    goal: "the engine is available".into(),
                    rows: Vec::new(),
                    notes: Vec::new(),
                    verdicts: Vec::new(),
                    error: Some(e),
                });
            }
        }
        let _ = std::fs::remove_dir_all(&work);
    }
    let _ = std::fs::remove_dir_all(out.join("work"));
    report.loadavg_end = loadavg();
    report::json::write(&report, &out.join("results.json"))?;
    write_outputs(&report, &out)?;
    eprintln!(
        "[bench] wrote {}/results.json, results.md, chart.svg, results.html",
        out.display()
    );
    if let Some(old) = &old {
        if old.quick != report.quick {
            eprintln!(
                "[bench] note: comparing a quick run with a full run; most rows will not match"
            );
        }
        let c = report::compare::compare(old, &report);
        let md = report::compare::markdown(&c);
        println!("{md}");
        std::fs::write(out.join("compare.md"), &md)
            .map_err(|e| format!("cannot write compare.md: {e}"))?;
        let json = serde_json::to_string_pretty(&c).map_err(|e| e.to_string())?;
        std::fs::write(out.join("compare.json"), json + "\n")
            .map_err(|e| format!("cannot write compare.json: {e}"))?;
        eprintln!(
            "[bench] wrote {}/compare.md, compare.json ({} flagged)",
            out.display(),
            c.flagged.len()
        );
    }
    let failed: Vec<String> = report
        .scenarios
        .iter()
        .filter_map(|s| {
            s.error
                .as_ref()
                .map(|e| format!("{} on {}: {e}", s.id, s.engine.name()))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("some scenarios failed:\n  {}", failed.join("\n  ")))
    }
}

/// Provisions one engine, generates what the scenarios need, runs them.
#[allow(clippy::too_many_arguments)]
async fn run_engine(
    engine: Engine,
    args: &BenchArgs,
    settings: &Settings,
    tools: &tools::Tools,
    loader: &Loader,
    apijet: &Path,
    out: &Path,
    work: &Path,
) -> Result<(String, Vec<ScenarioReport>), String> {
    let data_dir = out.join("data");
    let db = engine::open(
        engine,
        &engine::Provision {
            postgres_url: args.postgres_url.as_deref(),
            mysql_url: args.mysql_url.as_deref(),
            database: &args.database,
            data_dir: &data_dir,
            durable: !args.no_durable,
        },
    )
    .await?;
    eprintln!(
        "[bench] {}: {} ({}; {}), {}",
        engine.name(),
        db.version,
        db.origin,
        db.durability,
        db.url
    );
    // The demo tables (Access, Request, User, Moment, Comment, …) come from `apijet demo`.
    let status = tokio::process::Command::new(apijet)
        .arg("demo")
        .arg("--db")
        .arg(&db.url)
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .map_err(|e| format!("cannot run {} demo: {e}", apijet.display()))?;
    if !status.success() {
        return Err(format!("apijet demo --db {} failed ({status})", db.url));
    }
    let scenarios = args.scenarios();
    let want = |s: ScenarioId| scenarios.contains(&s);
    let mut conn = DbConn::connect(engine, &db.url).await?;
    data::check_series(&mut conn, engine).await?;
    if want(ScenarioId::List) {
        data::t_event::generate(&mut conn, engine, settings.t_event_rows).await?;
    }
    if want(ScenarioId::Point) || want(ScenarioId::Cache) {
        data::sku::generate(&mut conn, engine, settings.sku_rows).await?;
    }
    if want(ScenarioId::Nested)
        || want(ScenarioId::Tfb)
        || want(ScenarioId::Insert)
        || want(ScenarioId::Live)
        || want(ScenarioId::Cache)
    {
        data::demo::scale_up(&mut conn, engine, settings.demo).await?;
    }
    drop(conn);
    let ctx = scenario::Ctx {
        settings,
        tools,
        loader,
        db: &db,
        apijet,
        work: work.to_path_buf(),
    };
    let mut results = Vec::new();
    let mut ids = scenarios.clone();
    ids.sort();
    ids.dedup();
    for id in ids {
        eprintln!("[bench] {}: scenario {id:?}", engine.name());
        let r = match id {
            ScenarioId::List => scenario::list::run(&ctx).await,
            ScenarioId::Point => scenario::point::run(&ctx).await,
            ScenarioId::Nested => scenario::nested::run(&ctx).await,
            ScenarioId::Tfb => scenario::tfb::run(&ctx).await,
            ScenarioId::Insert => scenario::inserts::run(&ctx).await,
            ScenarioId::Live => scenario::live::run(&ctx).await,
            ScenarioId::Cache => scenario::cache::run(&ctx).await,
        };
        println!("{}", report::table::scenario_section(&r, &db.version));
        results.push(r);
    }
    let version = format!("{}; {}", db.version, db.durability);
    drop(db);
    if engine.embedded() && !args.keep_data {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    Ok((version, results))
}
